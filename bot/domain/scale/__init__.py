"""Scaling: the targets and their bounds, a scale-up's one record and what it bought, the
pilot's verdict, a put-back followed to the fleet."""
