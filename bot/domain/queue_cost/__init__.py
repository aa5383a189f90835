"""The jobs behind the queue and what the queue cost them."""
