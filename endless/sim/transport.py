"""In-process transports: the SDK clients talk to a :class:`~endless.sim.simulator.Simulator` directly.

Two HTTP libraries are in use: the current SDKs (``openai`` 3.x, ``anthropic``
2.x) are built on ``httpx2``, the generation Hermes pins (``openai`` 2.24,
``anthropic`` 0.87) on ``httpx``.  ``anthropic`` 2.x refuses an ``httpx``
client; ``openai`` 3.x takes either.  The same code is built twice, once per
library:

- ``AsyncSimTransport`` / ``SimTransport``: ``httpx`` base classes;
- ``AsyncSimTransport2`` / ``SimTransport2``: ``httpx2`` base classes (None
  where ``httpx2`` is not installed).

:func:`transport_for` picks the right one for a client class at run time
(``transport_for(openai.DefaultAsyncHttpxClient, sim)``), and
:func:`openai_client` / :func:`anthropic_client` build a ready SDK client::

    client = openai_client(sim)                     # AsyncOpenAI on http://sim/v1
    client = anthropic_client(sim, sync=True)       # Anthropic

The async transports run the simulator on the caller's event loop, so on a
:class:`~endless.sim.clock.SimEventLoop` the providers' latencies cost no
real time.  They honour the request's read timeout (``httpx`` leaves timeouts
to the transport): a reply whose next byte does not come in time raises the
library's ``ReadTimeout``, which the SDKs turn into their timeout error.  The
sync transports run each call on a private event loop (a SimEventLoop unless
``simulated=False``), so they cannot be used from inside a running loop.
"""

from __future__ import annotations

import asyncio
import threading
from types import ModuleType
from typing import Any

import httpx

try:
    import httpx2
except ImportError:  # pragma: no cover - the pinned generation may lack it
    httpx2 = None  # type: ignore[assignment]

from .clock import SimEventLoop
from .simulator import SimResponse, Simulator

__all__ = ["AsyncSimTransport", "SimTransport", "AsyncSimTransport2", "SimTransport2",
           "transport_for", "openai_client", "anthropic_client"]


def _read_timeout(request: Any) -> float | None:
    timeout = request.extensions.get("timeout") or {}
    value = timeout.get("read")
    return None if value is None else float(value)


async def _call(simulator: Simulator, request: Any, body: bytes, lib: ModuleType,
                timeout: float | None) -> SimResponse:
    headers = {k.decode("latin-1") if isinstance(k, bytes) else k:
               v.decode("latin-1") if isinstance(v, bytes) else v
               for k, v in request.headers.raw}
    path = request.url.raw_path.decode("ascii")
    try:
        return await asyncio.wait_for(simulator.handle(request.method, path, headers, body), timeout)
    except asyncio.TimeoutError:
        raise lib.ReadTimeout(f"simulated provider sent nothing in {timeout} s", request=request) from None


async def _next_chunk(iterator: Any, lib: ModuleType, request: Any, timeout: float | None) -> bytes | None:
    try:
        return await asyncio.wait_for(iterator.__anext__(), timeout)
    except StopAsyncIteration:
        return None
    except asyncio.TimeoutError:
        raise lib.ReadTimeout(f"simulated provider stalled for {timeout} s mid-stream",
                              request=request) from None


def _build(lib: ModuleType) -> tuple[type, type]:
    """The async and sync transport classes on ``lib``'s (``httpx`` or ``httpx2``) base classes."""

    class _AsyncStream(lib.AsyncByteStream):
        def __init__(self, response: SimResponse, request: Any, timeout: float | None) -> None:
            self._iterator = response.aiter()
            self._request = request
            self._timeout = timeout

        async def __aiter__(self):
            while True:
                chunk = await _next_chunk(self._iterator, lib, self._request, self._timeout)
                if chunk is None:
                    return
                yield chunk

        async def aclose(self) -> None:
            await self._iterator.aclose()

    class AsyncTransport(lib.AsyncBaseTransport):
        """Hands each request to the simulator on the running event loop."""

        library = lib

        def __init__(self, simulator: Simulator) -> None:
            self.simulator = simulator

        async def handle_async_request(self, request: Any) -> Any:
            body = await request.aread()
            timeout = _read_timeout(request)
            response = await _call(self.simulator, request, body, lib, timeout)
            return lib.Response(response.status, headers=list(response.headers.items()),
                                stream=_AsyncStream(response, request, timeout), request=request)

    class _SyncStream(lib.SyncByteStream):
        def __init__(self, transport: "SyncTransport", response: SimResponse, request: Any,
                     timeout: float | None) -> None:
            self._transport = transport
            self._iterator = response.aiter()
            self._request = request
            self._timeout = timeout

        def __iter__(self):
            while True:
                chunk = self._transport._run(_next_chunk(self._iterator, lib, self._request, self._timeout))
                if chunk is None:
                    return
                yield chunk

        def close(self) -> None:
            if not self._transport._loop.is_closed():
                self._transport._run(self._iterator.aclose())

    class SyncTransport(lib.BaseTransport):
        """Runs each request on a private event loop (simulated time unless ``simulated=False``)."""

        library = lib

        def __init__(self, simulator: Simulator, *, simulated: bool = True) -> None:
            self.simulator = simulator
            self._loop = SimEventLoop() if simulated else asyncio.new_event_loop()
            self._lock = threading.RLock()

        def _run(self, coroutine: Any) -> Any:
            with self._lock:
                return self._loop.run_until_complete(coroutine)

        def handle_request(self, request: Any) -> Any:
            body = request.read()
            timeout = _read_timeout(request)
            response = self._run(_call(self.simulator, request, body, lib, timeout))
            return lib.Response(response.status, headers=list(response.headers.items()),
                                stream=_SyncStream(self, response, request, timeout), request=request)

        def close(self) -> None:
            with self._lock:
                if not self._loop.is_closed():
                    self._loop.close()

    suffix = "2" if lib.__name__ == "httpx2" else ""
    AsyncTransport.__name__ = AsyncTransport.__qualname__ = f"AsyncSimTransport{suffix}"
    SyncTransport.__name__ = SyncTransport.__qualname__ = f"SimTransport{suffix}"
    return AsyncTransport, SyncTransport


AsyncSimTransport, SimTransport = _build(httpx)
if httpx2 is not None:
    AsyncSimTransport2, SimTransport2 = _build(httpx2)
else:  # pragma: no cover
    AsyncSimTransport2 = SimTransport2 = None  # type: ignore[assignment,misc]


def transport_for(client_class: type, simulator: Simulator, **options: Any) -> Any:
    """The transport that fits an HTTP client class, e.g. ``openai.DefaultAsyncHttpxClient``.

    Decided at run time by the class's bases, so the same code serves the SDKs
    built on ``httpx2`` and the older ones built on ``httpx``.  ``options`` go
    to the sync transports (``simulated=``).
    """
    libraries = [(httpx2, AsyncSimTransport2, SimTransport2)] if httpx2 is not None else []
    libraries.append((httpx, AsyncSimTransport, SimTransport))
    for lib, async_transport, sync_transport in libraries:
        if issubclass(client_class, lib.AsyncClient):
            return async_transport(simulator)
        if issubclass(client_class, lib.Client):
            return sync_transport(simulator, **options)
    raise TypeError(f"{client_class!r} is neither an httpx nor an httpx2 client class")


def _sdk(provider: str) -> Any:
    if provider == "openai":
        import openai as sdk
    elif provider == "anthropic":
        import anthropic as sdk  # type: ignore[no-redef]
    else:
        raise ValueError(f"no simulated SDK for provider {provider!r}; use 'openai' or 'anthropic'")
    return sdk


def _client(provider: str, simulator: Simulator, sync: bool, base_url: str, api_key: str,
            kwargs: dict[str, Any]) -> Any:
    sdk = _sdk(provider)
    client_class = sdk.DefaultHttpxClient if sync else sdk.DefaultAsyncHttpxClient
    sdk_class = {("openai", True): "OpenAI", ("openai", False): "AsyncOpenAI",
                 ("anthropic", True): "Anthropic", ("anthropic", False): "AsyncAnthropic"}[(provider, sync)]
    transport_options = {k: kwargs.pop(k) for k in ("simulated",) if k in kwargs}
    http_client = client_class(transport=transport_for(client_class, simulator, **transport_options))
    return getattr(sdk, sdk_class)(base_url=base_url, api_key=api_key, http_client=http_client, **kwargs)


def openai_client(simulator: Simulator, *, sync: bool = False, base_url: str = "http://sim/v1",
                  api_key: str = "sim", **kwargs: Any) -> Any:
    """An ``openai`` client (``AsyncOpenAI``, or ``OpenAI`` with ``sync=True``) wired to the simulator."""
    return _client("openai", simulator, sync, base_url, api_key, kwargs)


def anthropic_client(simulator: Simulator, *, sync: bool = False, base_url: str = "http://sim",
                     api_key: str = "sim", **kwargs: Any) -> Any:
    """An ``anthropic`` client (``AsyncAnthropic``, or ``Anthropic`` with ``sync=True``) wired to the simulator."""
    return _client("anthropic", simulator, sync, base_url, api_key, kwargs)


def sdk_http_client(provider: str, simulator: Simulator) -> Any:
    """The async HTTP client an ``openai`` or ``anthropic`` SDK client needs to reach the simulator."""
    sdk = _sdk(provider)
    return sdk.DefaultAsyncHttpxClient(transport=transport_for(sdk.DefaultAsyncHttpxClient, simulator))
