"""Budgets, quotas and the admission screen that holds work back when either says no."""
