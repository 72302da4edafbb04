"""Probing the endpoints of Certificates: which revision each server really serves
(docs/verifying-deployments.md). `handshake` reads a chain over the network, `assess` says
what it means, `known` reads what a Certificate has been, `schedule` decides when to look,
`runner` is the worker's step that probes on threads of its own, `endpoints` what people do."""
