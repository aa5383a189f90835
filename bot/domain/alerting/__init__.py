"""What an alert says: its notification read, the delivery, matchers and routes, and the
alert's GitHub issue."""
