"""HTTP-01 answering, in one place: the solver (`solver`: presenting is a flag on the row,
answers remembered while the database is away), the answer in front of Django at the ASGI
layer (`asgi`), and the Django view and middleware for other servers (`views`).

The token lookup they share is compiled once per database by an ORM bypass, which lives
with the other bypasses in `issuance/fastpaths/http01_lookup.py` (decision 0004 measures
them there; that package may reach nothing above the models).
"""
