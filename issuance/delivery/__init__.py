"""Getting key pairs onto servers: scoped download tokens, output formats, the download view."""
