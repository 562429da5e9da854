"""Static files served by daphne itself, with a path that climbs out (`/static/../x`) answered 400, not 500."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.exceptions import SuspiciousOperation
from django.core.handlers.exception import response_for_exception
from django.http import HttpRequest


class StaticFiles(ASGIStaticFilesHandler):
    """Django's handler raises SuspiciousFileOperation for a traversal past its own 404 handling."""

    async def get_response_async(self, request: HttpRequest) -> Any:
        try:
            return await super().get_response_async(request)
        except SuspiciousOperation as e:  # Django's own mapping: 400, logged under django.security
            return await sync_to_async(response_for_exception, thread_sensitive=False)(request, e)
