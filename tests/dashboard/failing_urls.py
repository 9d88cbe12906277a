"""The product's URLs plus one page and one API route that fail, to see what a user gets
when the server breaks."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from config.urls import *  # noqa: F403 - the handlers as well as the routes
from config.urls import urlpatterns as product_urlpatterns


def broken(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug")


urlpatterns = [
    path("broken/", broken),
    path("v1/broken", broken),
    *product_urlpatterns,
]
