"""The client of a user's own RAG service (judges/service.py) against a real local HTTP service."""
import pytest

from judges.config import EndpointSystemConfig
from judges.service import ServiceClient, ServiceError
from tests.conftest import bioasq_questions


def config(url: str, **options) -> EndpointSystemConfig:
    return EndpointSystemConfig(name="my-rag", url=url, **options)


def test_answer_and_contexts_come_back(rag_service):
    question = bioasq_questions(1)[0]
    with ServiceClient(config(rag_service.url)) as client:
        reply = client.ask(question["id"], question["body"])
    assert reply.answer and len(reply.contexts) == 3 and reply.attempts == 1


def test_a_5xx_is_retried_then_recorded_with_its_attempts(rag_service):
    question = bioasq_questions(1)[0]
    rag_service.failing.add(question["id"])
    with ServiceClient(config(rag_service.url, max_retries=2), backoff_base_s=0.01) as client:
        with pytest.raises(ServiceError) as error:
            client.ask(question["id"], question["body"])
    assert error.value.attempts == 3 and rag_service.requests == 3
    assert "HTTP 503" in str(error.value) and "after 3 attempts" in str(error.value)


def test_headers_come_from_named_variables_and_a_missing_one_is_a_clear_error(rag_service, monkeypatch):
    monkeypatch.setenv("MY_RAG_TOKEN", "Bearer t-123")
    question = bioasq_questions(1)[0]
    with ServiceClient(config(rag_service.url, headers={"Authorization": "MY_RAG_TOKEN"})) as client:
        client.ask(question["id"], question["body"])
    assert rag_service.headers_seen[-1]["Authorization"] == "Bearer t-123"
    with pytest.raises(ValueError, match=r"header variable\(s\) \['ABSENT_TOKEN'\] are not set"):
        ServiceClient(config(rag_service.url, headers={"X-Key": "ABSENT_TOKEN"}))


@pytest.mark.parametrize("reply, problem", [
    ({"text": "an answer"}, 'lacks a string "answer"'),
    ({"answer": "yes", "contexts": "one passage"}, '"contexts" must be a list of strings'),
])
def test_a_reply_off_the_protocol_fails_at_once(reply, problem):
    import httpx

    from judges.service import parse_reply

    with pytest.raises(ServiceError, match=problem):
        parse_reply(httpx.Response(200, json=reply), attempt=1)


def test_an_unknown_question_still_gets_an_answer_without_contexts(rag_service):
    with ServiceClient(config(rag_service.url)) as client:
        reply = client.ask("x", "a question the service has no snippets for")
    assert reply.contexts == []
