"""One Responder for a whole route: writer calls to the writer model, everything else to the agent."""

from __future__ import annotations

from endless.sim.model import Responder, SimReply, SimRequest
from endless.sim.writer_model import is_writer_request


class RoutedResponder:
    """Sends ``Compaction:`` requests (and their retries) to ``writer``, the rest to ``agent``."""

    def __init__(self, writer: Responder, agent: Responder) -> None:
        self.writer = writer
        self.agent = agent
        self.writer_requests = 0
        self.agent_requests = 0

    def reply(self, request: SimRequest, now: float) -> SimReply:
        if is_writer_request(request):
            self.writer_requests += 1
            return self.writer.reply(request, now)
        self.agent_requests += 1
        return self.agent.reply(request, now)


def route_responder(writer: Responder, agent: Responder) -> RoutedResponder:
    return RoutedResponder(writer, agent)
