"""What is recorded and shown about the resources: the timeline (`events`), live updates
after commit (`publish`, the only way updates leave the domain), Prometheus metrics read at
scrape time (`metrics`) and the dashboard's grouped numbers (`stats`)."""
