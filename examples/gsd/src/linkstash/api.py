"""The HTTP API: a regex router and JSON responses (02-01); the endpoints come in 02-02 and 02-03."""

import json
import re
from http import HTTPStatus

ROUTES: list[tuple[str, re.Pattern, object]] = []


def route(method: str, pattern: str):
    def register(handler):
        ROUTES.append((method, re.compile(pattern + r"\Z"), handler))
        return handler
    return register


def json_response(status: HTTPStatus, body) -> tuple[int, bytes]:
    return int(status), json.dumps(body).encode()


def dispatch(method: str, path: str, body: bytes) -> tuple[int, bytes]:
    allowed = False
    for want, pattern, handler in ROUTES:
        match = pattern.match(path)
        if match:
            allowed = True
            if want == method:
                return handler(body, **match.groupdict())
    status = HTTPStatus.METHOD_NOT_ALLOWED if allowed else HTTPStatus.NOT_FOUND
    return json_response(status, {"error": {"code": status.phrase.lower().replace(" ", "_"), "message": path}})
