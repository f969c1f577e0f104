"""Stopping cells early (:mod:`.rules`, :mod:`.groups`), and the sweep's GPU-hours cap
(:mod:`.budget`), in the scheduler loop through :mod:`.hook`. Import each name from its module."""
