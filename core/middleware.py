"""Requests refused before any view runs, for what no view can handle."""

from django.http import HttpResponseBadRequest


def refuse_nul_in_query(get_response):
    """A NUL character in the query string is a 400: no text column stores one, and PostgreSQL
    refuses a query that compares with one, so any filter or lookup given one would fail."""

    def middleware(request):
        if any("\x00" in key + "".join(values) for key, values in request.GET.lists()):
            return HttpResponseBadRequest("NUL characters are not allowed in the query string.")
        return get_response(request)

    return middleware
