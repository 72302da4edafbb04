"""RFC 8555 spoken to a CA: plain values in (URLs, keys, PEM text, a `CaRecord`), plain
values and `Acme*Error`s out. Nothing here imports the models: what is stored about a CA or
an account is read and written by the modules of issuance.acme around it."""
