"""The state the ACME protocol layer (issuance.acme) works with, kept in the database.

issuance.acme speaks RFC 8555 and takes and returns plain values; what outlives a request
lives here: each CA's pauses (ratelimit) and reachability (health), cached per process
(servers), the client's view of both (record), and the issuers' accounts (accounts).
"""
