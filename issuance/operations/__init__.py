"""What people do to the console's own resources, the same functions for the API, the pages
and certctl: one at a time (`actions`: renew, revoke, approve, deny, delete) or many
(`bulk`, carried out chunk by chunk through `actions`)."""
