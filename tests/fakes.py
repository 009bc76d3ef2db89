"""The one stand-in for judges.client.LLMClient in tests that need no server."""
from __future__ import annotations

from collections.abc import Callable, Iterable

from judges.client import ChatRequest, ChatResult

Reply = str | Exception
Replies = str | Iterable[Reply] | Callable[[ChatRequest], Reply]


class FakeLLMClient:
    """Stands in for LLMClient (`chat` and `map`): records every request and answers it from `replies`,
    which is one reply for every request (a str), the next reply of a list, or a function of the request.
    A reply that is an exception is raised, as the client does after its transport retries. Every answer
    counts `prompt_tokens` and `completion_tokens`, in one attempt."""

    def __init__(self, replies: Replies, *, prompt_tokens: int = 10, completion_tokens: int = 5):
        self.requests: list[ChatRequest] = []
        self.prompt_tokens, self.completion_tokens = prompt_tokens, completion_tokens
        self._reply = _reply_source(replies)

    @property
    def prompts(self) -> list[str]:
        """The last message of every request, in order."""
        return [request.messages[-1]["content"] for request in self.requests]

    def chat(self, request: ChatRequest) -> ChatResult:
        self.requests.append(request)
        reply = self._reply(request)
        if isinstance(reply, Exception):
            raise reply
        return ChatResult(reply, self.prompt_tokens, self.completion_tokens, "stop", 1)

    def map(self, fn, items):
        return [fn(item) for item in items]


def _reply_source(replies: Replies) -> Callable[[ChatRequest], Reply]:
    if callable(replies):
        return replies
    if isinstance(replies, str):
        return lambda request: replies
    queue = list(replies)
    return lambda request: queue.pop(0)
