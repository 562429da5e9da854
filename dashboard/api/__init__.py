"""The REST API (django-ninja): one Router per area under /v1/, OpenAPI + docs at /api/docs."""
