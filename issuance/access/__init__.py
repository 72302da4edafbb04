"""Who may do what: console users (`users`), their roles (`roles`: Django groups), roles
scoped to clusters and namespaces (`scope`), and their REST API tokens (`apitokens`)."""
