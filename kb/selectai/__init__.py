"""Select AI for the KB demo: turn a Korean or English question into a structured query plan.

The plan is executed (with the VPD policy applied) by the data layer; nothing here builds SQL.
"""
