"""Property-based fuzzing of the HTTP API from its own OpenAPI schema (schemathesis).

Every operation gets a bounded number of generated requests, valid and invalid; none may
answer 5xx (the server's fault), and every documented response must match its schema.
"""

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ragray.adapters.serving.local import local_app  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture()
def api_schema(served_config):
    return schemathesis.openapi.from_asgi("/openapi.json", local_app(served_config))


schema = schemathesis.pytest.from_fixture("api_schema")


def not_a_server_error(ctx, response, case):
    """No 5xx at all: bad input must be 4xx (a stricter form of schemathesis' own check)."""
    assert response.status_code < 500, f"{response.status_code}: {response.text[:500]}"


@schema.parametrize()
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much, HealthCheck.data_too_large])
def test_no_server_errors_and_responses_match_the_schema(case):
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance, status_code_conformance,
                                   content_type_conformance])
