"""`dpwise compare`: the guide's validation checklist, run for real on the user's hardware."""
