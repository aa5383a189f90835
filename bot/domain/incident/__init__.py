"""The incident: its lifecycle as pure functions, its view of the fleet, its trend and headline."""
