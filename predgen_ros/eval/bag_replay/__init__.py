"""Bags of spoken questions, made and replayed through the live graph (`predgen-ros eval`)."""
