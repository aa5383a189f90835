"""Moved to tests/support/servers.py. This re-export remains only for tests/test_slack_gateway.py
until its import names tests.support.servers; then this file goes."""

from tests.support.servers import free_port as free_port
