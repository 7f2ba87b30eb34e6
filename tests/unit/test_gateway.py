"""Tests for skillbench.gateway: tokens, the key swap, streaming, the ledger and its prices, caps, failures, TLS.

Every upstream here is a loopback stand-in the test controls (`FakeUpstream`); the session side talks
HTTP/1.1 over the gateway's Unix socket. Synchronisation is by events and queues, never by sleeping.
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import shutil
import socket
import ssl
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from settingsfactory import job_settings
from skillbench.base.artifacts import validate
from skillbench.base.redaction import redact_text
from skillbench.execution import gateway as gw
from skillbench.execution.gateway import GatewayError, ModelGateway, SecretMask, UsageMeter, request_cost, usage_record

KEY = "sk-ant-api03-REAL-provider-key-0123456789abcdef"
MODEL = "claude-sonnet-4-20250514"
UNPRICED = "claude-unpriced-model"
PRICES = {MODEL: {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_write_1h": 6.0, "cache_read": 0.3}}
WAIT_S = 30  # a bound for events that must happen; never reached when the code works
USAGE = {"input_tokens": 100, "output_tokens": 40, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 500}


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def sse_message(usage: dict[str, Any], *, model: str = MODEL, text: str = "hello") -> list[bytes]:
    start_usage = dict(usage, output_tokens=1)
    return [
        sse("message_start", {"type": "message_start", "message": {"model": model, "usage": start_usage}}),
        sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
        sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"text": text}}),
        sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage}),
        sse("message_stop", {"type": "message_stop"}),
    ]


class Reply:
    """What the fake upstream answers: a status, headers and body chunks (sent chunked unless `length`)."""

    def __init__(
        self,
        chunks: list[bytes],
        *,
        status: int = 200,
        content_type: str = "text/event-stream",
        headers: dict[str, str] | None = None,
        length: bool = False,
        gate: Callable[[int], None] | None = None,
        truncate_after: int | None = None,
    ) -> None:
        self.chunks = chunks
        self.status = status
        self.content_type = content_type
        self.headers = headers or {}
        self.length = length
        self.gate = gate  # called before chunk i is sent (tests block here)
        self.truncate_after = truncate_after  # close the connection after this many chunks


def json_reply(body: dict[str, Any], status: int = 200, **kwargs: Any) -> Reply:
    return Reply([json.dumps(body).encode()], status=status, content_type="application/json", length=True, **kwargs)


class FakeUpstream:
    """A loopback HTTP server that records every request (headers, body) and answers with `reply_for(request)`."""

    def __init__(self, reply_for: Callable[[dict[str, Any]], Reply], tls: ssl.SSLContext | None = None) -> None:
        self.reply_for = reply_for
        self.received: list[dict[str, Any]] = []
        self.arrivals: queue.Queue[dict[str, Any]] = queue.Queue()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = {"path": self.path, "headers": dict(self.headers.items()), "body": body}
                upstream.received.append(request)
                upstream.arrivals.put(request)
                upstream._answer(self, upstream.reply_for(request))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        handler.send_response(reply.status)
        handler.send_header("Content-Type", reply.content_type)
        handler.send_header("request-id", "req_fake_1")
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        if reply.length:
            handler.send_header("Content-Length", str(sum(len(chunk) for chunk in reply.chunks)))
        else:
            handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        try:
            for index, chunk in enumerate(reply.chunks):
                if reply.truncate_after is not None and index == reply.truncate_after:
                    handler.close_connection = True
                    handler.connection.shutdown(socket.SHUT_RDWR)
                    return
                if reply.gate is not None:
                    reply.gate(index)
                handler.wfile.write(chunk if reply.length else b"%x\r\n%s\r\n" % (len(chunk), chunk))
                handler.wfile.flush()
            if not reply.length:
                handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            handler.close_connection = True

    def __enter__(self) -> FakeUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over the gateway's Unix socket, as the bridge's forwarder delivers it."""

    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=WAIT_S)
        self.socket_path = str(path)

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(WAIT_S)
        self.sock.connect(self.socket_path)


def messages_body(model: str = MODEL, stream: bool = True) -> bytes:
    return json.dumps({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}).encode()


def post(
    connection: http.client.HTTPConnection,
    token: str | None,
    *,
    path: str = "/v1/messages?beta=true",
    body: bytes | None = None,
    bearer: bool = False,
) -> tuple[int, dict[str, str], bytes]:
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    if token is not None:
        headers["Authorization" if bearer else "x-api-key"] = f"Bearer {token}" if bearer else token
    connection.request("POST", path, body=messages_body() if body is None else body, headers=headers)
    response = connection.getresponse()
    return response.status, {name.lower(): value for name, value in response.getheaders()}, response.read()


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # Unix socket paths are limited to ~107 bytes; pytest's tmp_path can be longer.
    folder = Path(os.path.realpath("/tmp")) / f"sbx-gw-test-{os.getpid()}-{threading.get_ident() % 10_000}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def make_gateway(socket_dir: Path, upstream_url: str, name: str = "gw.sock", **kwargs: Any) -> ModelGateway:
    kwargs.setdefault("prices", PRICES)
    return ModelGateway(socket_dir / name, upstream=upstream_url, api_key=KEY, **kwargs)


def always(reply: Reply | Callable[[], Reply]) -> Callable[[dict[str, Any]], Reply]:
    return lambda request: reply() if callable(reply) else reply


# ---------------------------------------------------------------------------------------------
# Tokens


def test_tokens_are_refused_before_open_after_close_and_from_another_gateway(socket_dir):
    with FakeUpstream(always(lambda: Reply(sse_message(USAGE)))) as upstream:
        with (
            make_gateway(socket_dir, upstream.url) as gateway,
            make_gateway(socket_dir, upstream.url, "b.sock") as other,
        ):
            connection = UnixHTTPConnection(gateway.socket_path)
            status, headers, body = post(connection, None)
            assert status == 401 and headers["x-should-retry"] == "false"
            assert json.loads(body)["error"]["type"] == "authentication_error"
            assert post(connection, "sbx-session-made-up")[0] == 401
            assert post(connection, other.open_session("elsewhere"))[0] == 401

            token = gateway.open_session("work")
            assert post(connection, token)[0] == 200
            assert post(connection, token, bearer=True)[0] == 200
            ledger = gateway.close_session(token)
            assert ledger["open"] is False and ledger["closed_at"] is not None
            assert post(connection, token)[0] == 401
            assert post(connection, token, bearer=True)[0] == 401

            assert len(upstream.received) == 2  # nothing refused went upstream
            assert gateway.ledger(token)["totals"]["requests"] == 2
            assert gateway.stats()["unauthorized"] == 5


def test_tokens_are_fresh_prefixed_and_not_key_shaped(socket_dir):
    gateway = make_gateway(socket_dir, "http://127.0.0.1:9")
    tokens = {gateway.open_session(f"s{index}") for index in range(50)}
    assert len(tokens) == 50
    for token in tokens:
        assert token.startswith(gw.TOKEN_PREFIX) and len(token) > 40
        assert redact_text(token, []) == token  # no redaction pattern takes it for a provider key
    with pytest.raises(KeyError):
        gateway.ledger("sbx-session-unknown")


def test_the_socket_is_private_and_a_stale_one_is_replaced_but_nothing_else(socket_dir):
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(socket_dir / "gw.sock"))
    stale.close()
    with make_gateway(socket_dir, "http://127.0.0.1:9") as gateway:
        mode = os.stat(gateway.socket_path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    assert not (socket_dir / "gw.sock").exists()
    (socket_dir / "file.sock").write_text("not a socket")
    with pytest.raises(GatewayError, match="not a socket"):
        make_gateway(socket_dir, "http://127.0.0.1:9", "file.sock").start()


@pytest.mark.skipif(os.geteuid() != 0, reason="handing the socket to another uid needs root")
def test_the_socket_is_handed_to_the_sandbox_uid(socket_dir):
    with make_gateway(socket_dir, "http://127.0.0.1:9", socket_owner=(65431, 65431)) as gateway:
        info = os.stat(gateway.socket_path)
        assert (info.st_uid, info.st_gid) == (65431, 65431)


@pytest.mark.parametrize(
    "url", ["ftp://host/", "http://user:pw@host/", "https://host/?token=x", "https://host/#x", "http:///nohost"]
)
def test_upstream_urls_with_credentials_or_odd_schemes_are_refused(socket_dir, url):
    with pytest.raises(GatewayError):
        make_gateway(socket_dir, url)


def test_a_socket_path_longer_than_a_unix_socket_allows_is_refused_naming_tmpdir(socket_dir):
    # The longest path that binds is accepted; one byte more is refused before anything binds, with the fix.
    room = 107 - len(os.fsencode(socket_dir)) - 1
    with make_gateway(socket_dir, "http://127.0.0.1:9", "g" * room) as gateway:
        assert stat.S_ISSOCK(os.stat(gateway.socket_path).st_mode)
    with pytest.raises(GatewayError, match="point TMPDIR at a shorter folder"):
        make_gateway(socket_dir, "http://127.0.0.1:9", "g" * (room + 1))
    assert not (socket_dir / ("g" * (room + 1))).exists()


def test_a_gateway_needs_a_key(socket_dir):
    with pytest.raises(GatewayError, match="provider key"):
        ModelGateway(socket_dir / "gw.sock", upstream="http://127.0.0.1:9", api_key=" ", prices={})


# ---------------------------------------------------------------------------------------------
# The key swap


def test_upstream_gets_the_real_key_and_never_the_token_and_the_session_never_sees_the_key(socket_dir):
    # An upstream that echoes the key it was sent, in a header and in the body (the scripted model's
    # {{api_key}} does this): the session must still never see it.
    def reply_for(request: dict[str, Any]) -> Reply:
        echoed = request["headers"].get("x-api-key", "")
        chunks = sse_message(USAGE, text=f"your key is {echoed}")
        # The key split across two chunks, too.
        half = len(echoed) // 2
        chunks.insert(3, sse("content_block_delta", {"type": "content_block_delta", "delta": {"text": "x"}})[:-2])
        chunks[3] += f" {echoed[:half]}".encode()
        chunks.insert(4, f"{echoed[half:]}\n\n".encode())
        return Reply(chunks, headers={"x-echo": f"k={echoed}", "x-plain": "fine"})

    with FakeUpstream(reply_for) as upstream, make_gateway(socket_dir, upstream.url) as gateway:
        token = gateway.open_session("swap")
        connection = UnixHTTPConnection(gateway.socket_path)
        status, headers, body = post(connection, token, bearer=True)
        status_2, _, _ = post(connection, token)
        assert status == status_2 == 200

        for request in upstream.received:
            sent = {name.lower(): value for name, value in request["headers"].items()}
            assert sent["x-api-key"] == KEY
            assert "authorization" not in sent
            assert sent["accept-encoding"] == "identity"
            assert not any(token in value for value in sent.values())
        assert KEY.encode() not in body and KEY not in json.dumps(headers)
        assert b"your key is " + (gw.MASK * len(KEY))[: len(KEY)] in body
        assert headers["x-plain"] == "fine" and "x-echo" not in headers
        assert KEY not in json.dumps(gateway.ledger(token)) and token not in json.dumps(gateway.ledger(token))


# ---------------------------------------------------------------------------------------------
# Streaming and usage


def test_sse_is_relayed_as_it_arrives_and_its_usage_recorded(socket_dir):
    first_read = threading.Event()

    def gate(index: int) -> None:
        # The rest of the stream is held back until the session has read the first event.
        if index == 1:
            assert first_read.wait(WAIT_S)

    usage = {**USAGE, "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 300}}
    with FakeUpstream(always(lambda: Reply(sse_message(usage), gate=gate))) as upstream:
        with make_gateway(socket_dir, upstream.url) as gateway:
            token = gateway.open_session("stream")
            connection = UnixHTTPConnection(gateway.socket_path)
            connection.request("POST", "/v1/messages?beta=true", body=messages_body(), headers={"x-api-key": token})
            response = connection.getresponse()
            assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
            assert response.getheader("Transfer-Encoding") == "chunked"
            first = response.read1(65536)
            assert first.startswith(b"event: message_start")
            in_flight = gateway.ledger(token)
            assert in_flight["requests"][0]["outcome"] == "in-flight"
            assert in_flight["totals"]["in_flight"] == 1 and in_flight["totals"]["cost_usd"] is None
            first_read.set()
            rest = response.read()
            assert rest.endswith(sse("message_stop", {"type": "message_stop"}))
            # The same connection serves the next request (keep-alive towards the session).
            assert post(connection, token)[0] == 200

    entry = gateway.ledger(token)["requests"][0]
    assert entry["outcome"] == "ok" and entry["stream"] is True and entry["status"] == 200
    assert entry["model"] == entry["served_model"] == MODEL and entry["request_id"] == "req_fake_1"
    assert entry["usage"] == {
        "input_tokens": 100,
        "output_tokens": 40,  # message_delta's count, not message_start's placeholder 1
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 500,
        "cache_creation_5m_input_tokens": 200,
        "cache_creation_1h_input_tokens": 300,
    }
    assert entry["cost_usd"] == pytest.approx((100 * 3 + 40 * 15 + 1000 * 0.3 + 200 * 3.75 + 300 * 6) / 1e6)
    assert entry["started_at"] <= entry["finished_at"] and entry["duration_s"] >= 0


def test_json_answers_are_metered_from_their_usage(socket_dir):
    message = {"type": "message", "model": MODEL, "content": [], "usage": USAGE}
    with FakeUpstream(always(json_reply(message))) as upstream, make_gateway(socket_dir, upstream.url) as gateway:
        token = gateway.open_session("json")
        status, headers, body = post(UnixHTTPConnection(gateway.socket_path), token, body=messages_body(stream=False))
        assert status == 200 and json.loads(body) == message and headers["content-length"] == str(len(body))
    ledger = gateway.ledger(token)
    assert ledger["requests"][0]["stream"] is False
    assert ledger["requests"][0]["usage"]["cache_creation_1h_input_tokens"] is None
    assert ledger["totals"]["cost_usd"] == pytest.approx((100 * 3 + 40 * 15 + 1000 * 0.3 + 500 * 3.75) / 1e6)
    json.dumps(ledger)  # plain data


def test_a_request_for_a_model_without_a_price_ends_its_session_before_anything_goes_upstream(socket_dir):
    with FakeUpstream(always(lambda: Reply(sse_message(USAGE)))) as upstream:
        with make_gateway(socket_dir, upstream.url) as gateway:
            token = gateway.open_session("unpriced")
            other = gateway.open_session("neighbour")
            connection = UnixHTTPConnection(gateway.socket_path)
            status, headers, body = post(connection, token, body=messages_body(model=UNPRICED))
            assert status == 402 and headers["x-should-retry"] == "false"
            assert UNPRICED in json.loads(body)["error"]["message"]
            # The session is over: its next request is refused too, a priced one or a free count alike.
            assert post(connection, token)[0] == 402
            assert post(connection, token, path="/v1/messages/count_tokens?beta=true")[0] == 402
            assert post(connection, other)[0] == 200  # another session of the gateway is not affected
    assert len(upstream.received) == 1
    ledger = gateway.ledger(token)
    assert [entry["refused"] for entry in ledger["requests"]] == ["model-unpriced"] * 3
    assert [entry["cost_usd"] for entry in ledger["requests"]] == [0.0] * 3
    assert UNPRICED in ledger["requests"][0]["failure"] and ledger["requests"][0]["model"] == UNPRICED
    validate({"schema": "ledger/v1", "sessions": [{"role": "work", **ledger}]}, "ledger")


def test_pricing_follows_the_model_that_answered(socket_dir):
    with FakeUpstream(always(lambda: Reply(sse_message(USAGE, model=UNPRICED)))) as upstream:
        with make_gateway(socket_dir, upstream.url) as gateway:
            token = gateway.open_session("served")
            post(UnixHTTPConnection(gateway.socket_path), token, body=messages_body(model=MODEL))
    entry = gateway.ledger(token)["requests"][0]
    assert (entry["model"], entry["served_model"], entry["cost_usd"]) == (MODEL, UNPRICED, None)


def test_a_models_price_is_its_table_entry_as_stated_and_an_incomplete_one_is_no_price():
    from skillbench.execution.pricing import model_price

    tiered = {**PRICES[MODEL], "tiers": [{"above_tokens": 200_000, "input": 6.0}]}
    # The entry as the table states it, so the meter still sees what the rates leave out (a long prompt's tier).
    assert model_price({MODEL: tiered}, MODEL) is tiered
    assert model_price({MODEL: {"input": 3.0}}, MODEL) is None  # no output rate: the gateway could not meter it
    assert model_price(PRICES, UNPRICED) is None and model_price(PRICES, None) is None


def test_request_cost_prices_one_hour_writes_and_refuses_incomplete_input():
    usage = usage_record({**USAGE, "cache_creation": {"ephemeral_1h_input_tokens": 500}})
    assert request_cost(usage, PRICES[MODEL]) == pytest.approx((100 * 3 + 40 * 15 + 1000 * 0.3 + 500 * 6) / 1e6)
    # A table without cache_write_1h gets twice the input rate (as sessions.price_rates says).
    no_1h = {key: value for key, value in PRICES[MODEL].items() if key != "cache_write_1h"}
    assert request_cost(usage, no_1h) == request_cost(usage, PRICES[MODEL])
    assert request_cost(usage, None) is None
    assert request_cost(usage, {"input": 3.0}) is None
    assert request_cost(usage_record({**USAGE, "output_tokens": None}), PRICES[MODEL]) is None
    assert (
        request_cost(usage_record({**USAGE, "cache_creation": {"ephemeral_1h_input_tokens": 501}}), PRICES[MODEL])
        is None
    )
    assert request_cost(None, PRICES[MODEL]) is None


def test_usage_record_takes_the_final_counts_and_knows_when_output_is_missing():
    start = {**USAGE, "output_tokens": 1}
    assert usage_record(start, {"output_tokens": 77})["output_tokens"] == 77
    assert usage_record(start, {"output_tokens": 77, "input_tokens": 5})["input_tokens"] == 5
    assert usage_record(start, streamed=True)["output_tokens"] is None
    assert usage_record(None) is None
    assert usage_record({"input_tokens": True, "output_tokens": -1})["input_tokens"] is None


def test_usage_meter_reads_events_split_anywhere_and_crlf():
    stream = b"".join(sse_message(USAGE)).replace(b"\n", b"\r\n")
    meter = UsageMeter("text/event-stream; charset=utf-8")
    for index in range(0, len(stream), 7):
        meter.feed(stream[index : index + 7])
    assert meter.finish() == usage_record(USAGE)
    assert meter.stopped and meter.served_model == MODEL


def test_secret_mask_works_across_chunks_and_holds_back_only_what_could_be_the_secret():
    mask = SecretMask("sk-secret-123")
    assert mask.feed(b"event: x\n\n") == b"event: x\n\n"  # nothing held: an event is never delayed
    out = mask.feed(b"a sk-sec") + mask.feed(b"ret-123 b sk-") + mask.feed(b"other") + mask.flush()
    assert out == b"a KEY-MASKED-KE b sk-other"


# ---------------------------------------------------------------------------------------------
# Caps


def test_the_session_cap_refuses_before_forwarding_once_it_is_reached(socket_dir):
    one_request = request_cost(usage_record(USAGE), PRICES[MODEL])
    assert one_request is not None
    with FakeUpstream(always(lambda: Reply(sse_message(USAGE)))) as upstream:
        with make_gateway(socket_dir, upstream.url) as gateway:
            capped = gateway.open_session("capped", max_usd=one_request * 1.5)
            free = gateway.open_session("uncapped")
            connection = UnixHTTPConnection(gateway.socket_path)
            assert post(connection, capped)[0] == 200  # under the cap
            assert post(connection, capped)[0] == 200  # still under (1 request spent), crosses it
            status, headers, body = post(connection, capped)
            assert status == gw.REFUSAL_STATUS and headers["x-should-retry"] == "false"
            assert (
                json.loads(body)["error"]["type"] == "billing_error"
                and "spend cap" in json.loads(body)["error"]["message"]
            )
            assert post(connection, free)[0] == 200  # another session is not capped by this one
            assert len(upstream.received) == 3
    ledger = gateway.ledger(capped)
    assert [entry["outcome"] for entry in ledger["requests"]] == ["ok", "ok", "refused"]
    assert ledger["requests"][2]["refused"] == "session-cap" and ledger["requests"][2]["cost_usd"] == 0.0
    assert ledger["totals"]["refused"] == 1 and ledger["totals"]["forwarded"] == 2
    assert ledger["max_usd"] == pytest.approx(one_request * 1.5)


def test_the_run_budget_counts_spend_elsewhere_and_every_session_of_the_gateway(socket_dir):
    one_request = request_cost(usage_record(USAGE), PRICES[MODEL])
    assert one_request is not None
    elsewhere = {"usd": 0.0}
    with FakeUpstream(always(lambda: Reply(sse_message(USAGE)))) as upstream:
        gateway = make_gateway(socket_dir, upstream.url, budget_usd=1.0, spent_elsewhere=lambda: elsewhere["usd"])
        with gateway:
            connection = UnixHTTPConnection(gateway.socket_path)
            first = gateway.open_session("first")
            assert post(connection, first)[0] == 200
            elsewhere["usd"] = 1.0 - one_request  # with the first session's spend, exactly at the budget
            second = gateway.open_session("second", max_usd=5.0)
            status, _, body = post(connection, second)
            assert status == gw.REFUSAL_STATUS and "budget" in json.loads(body)["error"]["message"]
            assert len(upstream.received) == 1
    assert gateway.ledger(second)["requests"][0]["refused"] == "budget"
    assert gateway.spent_usd() == pytest.approx(one_request)


def test_a_budget_that_cannot_be_read_is_a_gateway_error_not_a_refusal(socket_dir):
    def broken() -> float:
        raise OSError("progress file unreadable")

    with FakeUpstream(always(lambda: Reply(sse_message(USAGE)))) as upstream:
        with make_gateway(socket_dir, upstream.url, budget_usd=1.0, spent_elsewhere=broken) as gateway:
            token = gateway.open_session("s")
            status, headers, _ = post(UnixHTTPConnection(gateway.socket_path), token)
            assert status == 500 and headers["x-should-retry"] == "false" and not upstream.received
    entry = gateway.ledger(token)["requests"][0]
    assert entry["outcome"] == "gateway-error" and entry["refused"] is None


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), True, "1"])
def test_caps_must_be_finite_non_negative_numbers(socket_dir, value):
    with pytest.raises(ValueError):
        make_gateway(socket_dir, "http://127.0.0.1:9").open_session("s", max_usd=value)
    with pytest.raises(ValueError):
        make_gateway(socket_dir, "http://127.0.0.1:9", budget_usd=value)


# ---------------------------------------------------------------------------------------------
# Failures


def closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # bound, never listened: connecting is refused
    return port


def test_an_unreachable_upstream_is_an_upstream_failure(socket_dir):
    with make_gateway(socket_dir, f"http://127.0.0.1:{closed_port()}") as gateway:
        token = gateway.open_session("down")
        status, headers, body = post(UnixHTTPConnection(gateway.socket_path), token)
    assert status == 502 and "x-should-retry" not in headers  # the CLI may retry a transient failure
    assert json.loads(body)["error"]["type"] == "api_error"
    entry = gateway.ledger(token)["requests"][0]
    assert entry["outcome"] == "upstream-failure" and entry["failure"] == "connection refused"
    assert entry["cost_usd"] == 0.0 and entry["refused"] is None
    assert gateway.ledger(token)["totals"]["upstream_failures"] == 1


def test_upstream_error_statuses_pass_through_and_are_recorded(socket_dir):
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with FakeUpstream(always(json_reply(error, status=529))) as upstream:
        with make_gateway(socket_dir, upstream.url) as gateway:
            token = gateway.open_session("busy")
            status, _, body = post(UnixHTTPConnection(gateway.socket_path), token)
    assert status == 529 and json.loads(body) == error
    entry = gateway.ledger(token)["requests"][0]
    assert (entry["outcome"], entry["status"], entry["cost_usd"]) == ("upstream-error", 529, 0.0)
    assert entry["failure"] == "upstream status 529"


def test_a_stream_that_breaks_off_is_an_upstream_failure_with_unmeasured_cost(socket_dir):
    with FakeUpstream(always(lambda: Reply(sse_message(USAGE), length=True, truncate_after=2))) as upstream:
        with make_gateway(socket_dir, upstream.url) as gateway:
            token = gateway.open_session("cut")
            connection = UnixHTTPConnection(gateway.socket_path)
            connection.request("POST", "/v1/messages", body=messages_body(), headers={"x-api-key": token})
            response = connection.getresponse()
            with pytest.raises(http.client.IncompleteRead):
                response.read()
    entry = gateway.ledger(token)["requests"][0]
    assert entry["outcome"] == "upstream-failure" and "broke off" in entry["failure"]
    assert entry["cost_usd"] is None and entry["usage"]["output_tokens"] is None
    assert gateway.ledger(token)["totals"]["cost_usd"] is None


def test_a_session_that_hangs_up_mid_answer_is_recorded_as_gone(socket_dir):
    hung_up = threading.Event()
    settled: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()

    def gate(index: int) -> None:
        if index == 1:
            assert hung_up.wait(WAIT_S)

    chunks = sse_message(USAGE) + [sse("ping", {"type": "ping"})] * 64
    with FakeUpstream(always(lambda: Reply(chunks, gate=gate))) as upstream:
        gateway = make_gateway(socket_dir, upstream.url, on_settled=lambda label, entry: settled.put((label, entry)))
        with gateway:
            token = gateway.open_session("gone")
            raw = socket.socket(socket.AF_UNIX)
            raw.connect(str(gateway.socket_path))
            body = messages_body()
            raw.sendall(
                b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\nContent-Length: %d\r\n\r\n%s"
                % (token.encode(), len(body), body)
            )
            assert raw.recv(65536).startswith(b"HTTP/1.1 200")
            raw.close()
            hung_up.set()
            label, entry = settled.get(timeout=WAIT_S)
    assert label == "gone" and entry["outcome"] == "client-gone" and entry["finished_at"] is not None
    assert gateway.ledger(token)["totals"]["client_gone"] == 1


def test_stopping_waits_for_a_request_that_was_answered_but_not_yet_reported(socket_dir):
    reported: list[str] = []
    answered = threading.Event()

    def slow_report(label: str, entry: dict[str, Any]) -> None:
        # The answer has reached the session; its report comes later, as it may on a loaded machine.
        assert answered.wait(WAIT_S)
        time.sleep(0.5)
        reported.append(entry["outcome"])

    with FakeUpstream(always(lambda: Reply(sse_message(USAGE)))) as upstream:
        gateway = make_gateway(socket_dir, upstream.url, on_settled=slow_report)
        with gateway:
            token = gateway.open_session("late")
            assert post(UnixHTTPConnection(gateway.socket_path), token)[0] == 200
            answered.set()
    # Whoever stopped the gateway (the spend meter's final write) saw the request's report: none comes after.
    assert reported == ["ok"]
    assert gateway.spent_usd() > 0


# ---------------------------------------------------------------------------------------------
# Other routes


def test_preconnect_count_tokens_and_unknown_routes(socket_dir):
    counted = {"input_tokens": 1234}
    with FakeUpstream(always(json_reply(counted))) as upstream, make_gateway(socket_dir, upstream.url) as gateway:
        token = gateway.open_session("routes")
        connection = UnixHTTPConnection(gateway.socket_path)
        connection.request("HEAD", "/")  # the CLI's preconnect carries no credentials
        head = connection.getresponse()
        assert head.status == 200 and head.read() == b""
        status, _, body = post(connection, token, path="/v1/messages/count_tokens?beta=true")
        assert status == 200 and json.loads(body) == counted
        assert post(connection, token, path="/v1/complete")[0] == 404
        assert post(connection, None, path="/v1/complete")[0] == 401
        connection.request("GET", "/v1/models", headers={"x-api-key": token})
        assert connection.getresponse().status == 404
        assert [request["path"] for request in upstream.received] == ["/v1/messages/count_tokens?beta=true"]
    entry = gateway.ledger(token)["requests"][0]
    assert (entry["kind"], entry["outcome"], entry["cost_usd"]) == ("count_tokens", "ok", 0.0)


def test_an_upstream_base_path_is_kept(socket_dir):
    with FakeUpstream(always(lambda: Reply(sse_message(USAGE)))) as upstream:
        with make_gateway(socket_dir, upstream.url + "/anthropic/") as gateway:
            post(UnixHTTPConnection(gateway.socket_path), gateway.open_session("prefix"))
    assert upstream.received[0]["path"] == "/anthropic/v1/messages?beta=true"


# ---------------------------------------------------------------------------------------------
# Concurrency


def test_two_sessions_in_flight_at_once_keep_their_own_ledgers(socket_dir):
    both_arrived = threading.Barrier(2, timeout=WAIT_S)

    def reply_for(request: dict[str, Any]) -> Reply:
        both_arrived.wait()  # each request waits until the other one is in flight too
        usage = dict(USAGE, input_tokens=int(json.loads(request["body"])["messages"][0]["content"]))
        return Reply(sse_message(usage))

    with FakeUpstream(reply_for) as upstream, make_gateway(socket_dir, upstream.url) as gateway:
        tokens = [gateway.open_session(f"s{index}") for index in range(2)]
        results: queue.Queue[int] = queue.Queue()

        def session(index: int) -> None:
            body = json.dumps(
                {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": str(index + 7)}]}
            )
            results.put(post(UnixHTTPConnection(gateway.socket_path), tokens[index], body=body.encode())[0])

        threads = [threading.Thread(target=session, args=(index,)) for index in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT_S)
        assert sorted(results.get_nowait() for _ in range(2)) == [200, 200]
    for index, token in enumerate(tokens):
        ledger = gateway.ledger(token)
        assert ledger["label"] == f"s{index}" and ledger["totals"]["requests"] == 1
        assert ledger["requests"][0]["usage"]["input_tokens"] == index + 7


# ---------------------------------------------------------------------------------------------
# TLS


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A test CA and a server certificate for 127.0.0.1 signed by it (openssl CLI)."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = folder / "ca.key", folder / "ca.pem"
    key, request, cert = folder / "server.key", folder / "server.csr", folder / "server.pem"
    extensions = folder / "ext.cnf"
    extensions.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    new_key = ["-newkey", "rsa:2048", "-nodes"]
    openssl("req", "-x509", *new_key, "-keyout", str(ca_key), "-out", str(ca_cert), "-days", "2", "-subj", "/CN=CA")
    openssl("req", *new_key, "-keyout", str(key), "-out", str(request), "-subj", "/CN=127.0.0.1")
    signed_by_ca = ["-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial", "-extfile", str(extensions)]
    openssl("x509", "-req", "-in", str(request), *signed_by_ca, "-out", str(cert), "-days", "2")
    return ca_cert, cert, key


@pytest.fixture
def tls_upstream(tmp_path) -> Iterator[tuple[FakeUpstream, Path]]:
    if shutil.which("openssl") is None:
        pytest.fail("the openssl CLI is needed for the TLS tests (Debian package openssl)")
    ca_cert, cert, key = make_certificates(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with FakeUpstream(always(lambda: Reply(sse_message(USAGE))), tls=context) as upstream:
        yield upstream, ca_cert


def test_an_https_upstream_is_verified_with_the_ca_ssl_cert_file_names(socket_dir, tls_upstream, monkeypatch):
    upstream, ca_cert = tls_upstream
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_cert))
    with make_gateway(socket_dir, upstream.url) as gateway:
        token = gateway.open_session("tls")
        connection = UnixHTTPConnection(gateway.socket_path)
        assert post(connection, token)[0] == 200
        assert post(connection, token)[0] == 200
    assert upstream.received[0]["headers"]["x-api-key"] == KEY
    assert gateway.ledger(token)["totals"]["cost_usd"] is not None


def test_an_https_upstream_with_an_untrusted_certificate_is_an_upstream_failure(socket_dir, tls_upstream, tmp_path):
    upstream, _ = tls_upstream
    trusting_nothing_here = ssl.create_default_context(cafile=str(make_certificates(tmp_path / "other")[0]))
    with make_gateway(socket_dir, upstream.url, ssl_context=trusting_nothing_here) as gateway:
        token = gateway.open_session("untrusted")
        status, _, _ = post(UnixHTTPConnection(gateway.socket_path), token)
    entry = gateway.ledger(token)["requests"][0]
    assert status == 502 and entry["outcome"] == "upstream-failure"
    assert entry["failure"].startswith("TLS verification failed") and not upstream.received


# ---------------------------------------------------------------------------------------------
# The bridge


def test_bridge_argv_and_urls():
    argv = gw.bridge_argv(["/opt/claude/claude", "-p"])
    assert argv == [
        "/usr/bin/python3",
        "-I",
        "-S",
        gw.BRIDGE_FORWARDER,
        str(gw.BRIDGE_PORT),
        gw.BRIDGE_SOCKET,
        "--",
        "/opt/claude/claude",
        "-p",
    ]
    exported = gw.bridge_argv(["/usr/bin/claude"], forwarder="/f.py", port=0, socket_path="/s", export="BASE")
    assert exported == ["/usr/bin/python3", "-I", "-S", "/f.py", "0", "/s", "--export", "BASE", "--", "/usr/bin/claude"]
    assert gw.bridge_base_url(1234) == "http://127.0.0.1:1234"
    assert gw.hide_bridge_args() == ["--tmpfs", gw.BRIDGE_SOCKET_DIR]
    assert gw.BRIDGE_SOCKET.startswith(gw.BRIDGE_SOCKET_DIR + "/")


BWRAP = shutil.which("bwrap")


@pytest.mark.skipif(BWRAP is None, reason="Bubblewrap is not installed (make setup installs it)")
def test_the_forwarder_is_the_only_way_out_of_a_namespace_without_network(socket_dir, tmp_path):
    """In `bwrap --unshare-net`: the forwarder reaches the gateway; the host's loopback and the socket's
    folder under hide_bridge_args do not."""
    host = socket.create_server(("127.0.0.1", 0))
    host_port = host.getsockname()[1]
    forwarder = gw.FORWARDER
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import http.client, socket, sys\n"
        "c = http.client.HTTPConnection('127.0.0.1', int(sys.argv[1]), timeout=20)\n"
        "c.request('POST', '/v1/messages', body=sys.argv[3], headers={'x-api-key': sys.argv[4]})\n"
        "r = c.getresponse(); print('bridge', r.status, r.read()[:20])\n"
        "s = socket.socket()\n"
        "try:\n"
        "    s.connect(('127.0.0.1', int(sys.argv[2]))); print('host-loopback reached')\n"
        "except OSError as exc:\n"
        "    print('host-loopback', type(exc).__name__)\n"
    )
    with FakeUpstream(always(lambda: Reply(sse_message(USAGE)))) as upstream:
        with make_gateway(socket_dir, upstream.url) as gateway:
            token = gateway.open_session("bridge")
            base = [BWRAP, "--unshare-user", "--unshare-net", "--unshare-pid", "--die-with-parent"]
            base += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run"]
            base += ["--ro-bind", str(gateway.socket_path), gw.BRIDGE_SOCKET]
            inner = [
                "/usr/bin/python3",
                str(probe),
                str(gw.BRIDGE_PORT),
                str(host_port),
                messages_body().decode(),
                token,
            ]
            command = [*base, "--", *gw.bridge_argv(inner, forwarder=str(forwarder))]
            env = {"PATH": "/usr/bin:/bin"}
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
            assert done.returncode == 0, done.stderr
            assert "bridge 200 b'event: message_start" in done.stdout
            assert "host-loopback ConnectionRefusedError" in done.stdout

            list_socket_folder = f"import os; print(os.listdir({gw.BRIDGE_SOCKET_DIR!r}))"
            nested = [*base, *gw.hide_bridge_args(), "--", "/usr/bin/python3", "-c", list_socket_folder]
            hidden = subprocess.run(nested, capture_output=True, text=True, env=env, timeout=60)
            assert hidden.returncode == 0, hidden.stderr
            assert hidden.stdout.strip() == "[]"
    host.close()
    assert gateway.ledger(token)["totals"]["requests"] == 1


# ---------------------------------------------------------------------------------------------
# The experiment's spend meter


def test_a_retried_attempts_spend_still_counts_toward_the_experiments_budget(socket_dir, tmp_path):
    from skillbench.execution import access

    one_request = request_cost(usage_record(USAGE), PRICES[MODEL])
    assert one_request is not None
    results = tmp_path / "results" / "exp"
    config = {
        "model": {"provider": "anthropic", "base_url": None},
        "agent": {"prices": {"usd_per_mtok": PRICES}},
        "budget": {"max_usd": one_request * 1.5},
    }

    def attempt(name: str) -> list[int]:
        root = socket_dir / name
        root.mkdir()
        with FakeUpstream(always(lambda: Reply(sse_message(USAGE)))) as upstream:
            with access.model_access(
                private_root=root,
                settings=job_settings(config),
                api_key=KEY,
                socket_owner=None,
                results_root=results,
                job="t/a/0",
            ) as model:
                token = model.gateway.open_session("s", upstream=upstream.url)
                connection = UnixHTTPConnection(model.socket)
                return [post(connection, token)[0] for _ in range(2)]

    # The first attempt spends one request, crosses the cap with the second, and is then retried.
    assert attempt("first") == [200, 200]
    assert access.RunSpend(results)() == pytest.approx(2 * one_request)
    # The retry is the same cell: what its first attempt spent is still the experiment's, so it is refused.
    assert attempt("second") == [gw.REFUSAL_STATUS, gw.REFUSAL_STATUS]
    meter = [json.loads(path.read_text()) for path in Path(layout_spend(results)).glob("*.json")]
    assert len(meter) == 2 and all(document["final"] is True for document in meter)
    assert sorted(document["usd"] for document in meter) == pytest.approx([0.0, 2 * one_request])


def layout_spend(results: Path) -> str:
    from skillbench.base import layout

    return layout.spend_meter(results)


def test_the_meter_reads_a_final_file_once_and_a_live_one_every_time(tmp_path):
    from skillbench.execution import access

    folder = Path(layout_spend(tmp_path))
    folder.mkdir(parents=True)
    (folder / "done.json").write_text(json.dumps({"job": "a", "usd": 1.0, "final": True}))
    (folder / "live.json").write_text(json.dumps({"job": "b", "usd": 0.5, "final": False}))
    (folder / "own.json").write_text(json.dumps({"job": "c", "usd": 9.0, "final": False}))
    meter = access.RunSpend(tmp_path, own=folder / "own.json")
    assert meter() == pytest.approx(1.5)
    (folder / "done.json").write_text(json.dumps({"job": "a", "usd": 100.0, "final": True}))
    (folder / "live.json").write_text(json.dumps({"job": "b", "usd": 0.75, "final": True}))
    (folder / "broken.json").write_text("{")
    assert meter() == pytest.approx(1.75)


# ---------------------------------------------------------------------------------------------
# Other wires: OpenAI Responses (Codex) and Gemini (Gemini CLI), each through a real gateway

RESPONSES_MODEL, SERVED_RESPONSES_MODEL, GEMINI_MODEL = "gpt-test", "gpt-test-2025-08-07", "gemini-test-pro"
WIRE_PRICES = {
    RESPONSES_MODEL: {"input": 1.0, "output": 8.0, "cache_write": 1.0, "cache_read": 0.1},
    SERVED_RESPONSES_MODEL: {"input": 1.25, "output": 10.0, "cache_write": 1.25, "cache_read": 0.125},
    GEMINI_MODEL: {"input": 2.0, "output": 12.0, "cache_write": 2.0, "cache_read": 0.5},
}
GEMINI_ROUTE = f"/v1beta/models/{GEMINI_MODEL}:streamGenerateContent"


def responses_sse(text: str) -> list[bytes]:
    """A Responses stream as the API sends it: usage only in response.completed (reasoning inside output)."""
    usage = {
        "input_tokens": 5000,
        "input_tokens_details": {"cached_tokens": 4000},
        "output_tokens": 300,
        "output_tokens_details": {"reasoning_tokens": 100},
        "total_tokens": 5300,
    }
    response = {"id": "resp_1", "object": "response", "model": SERVED_RESPONSES_MODEL}
    return [
        sse("response.created", {"type": "response.created", "response": {**response, "usage": None}}),
        sse("response.output_text.delta", {"type": "response.output_text.delta", "delta": text}),
        sse("response.completed", {"type": "response.completed", "response": {**response, "usage": usage}}),
    ]


def gemini_sse(text: str) -> list[bytes]:
    """A Gemini stream as the API sends it: `data:` chunks, CRLF, the full usage in the finishing chunk."""

    def chunk(document: dict[str, Any]) -> bytes:
        return f"data: {json.dumps(document)}\r\n\r\n".encode()

    parts = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    final = {
        "promptTokenCount": 7000,
        "cachedContentTokenCount": 6000,
        "candidatesTokenCount": 150,
        "thoughtsTokenCount": 250,
        "totalTokenCount": 7400,
    }
    return [
        chunk({"candidates": [parts], "usageMetadata": {"promptTokenCount": 7000}, "modelVersion": GEMINI_MODEL}),
        chunk(
            {"candidates": [{**parts, "finishReason": "STOP"}], "usageMetadata": final, "modelVersion": GEMINI_MODEL}
        ),
    ]


def echoing(render: Callable[[str], list[bytes]]) -> Callable[[dict[str, Any]], Reply]:
    """An upstream that answers counts and echoes the key it was sent (in a header and in the body)."""

    def reply_for(request: dict[str, Any]) -> Reply:
        headers = {name.lower(): value for name, value in request["headers"].items()}
        echoed = headers.get("x-goog-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        if ":countTokens" in request["path"]:
            return json_reply({"totalTokens": 31})
        return Reply(render(f"your key is {echoed}"), headers={"x-echo": echoed, "x-request-id": "req_wire_1"})

    return reply_for


def send(connection: http.client.HTTPConnection, path: str, headers: dict[str, str], body: bytes = b"{}") -> tuple:
    connection.request("POST", path, body=body, headers={"content-type": "application/json", **headers})
    response = connection.getresponse()
    return response.status, {name.lower(): value for name, value in response.getheaders()}, response.read()


def assert_token_never_upstream(upstream: FakeUpstream, tokens: list[str]) -> None:
    for request in upstream.received:
        seen = request["path"] + json.dumps(request["headers"]) + request["body"].decode()
        assert not any(token in seen for token in tokens)
        assert gw.TOKEN_PREFIX not in seen


def test_a_responses_session_is_metered_priced_and_capped_in_its_own_shape(socket_dir):
    codex_body = json.dumps({"model": RESPONSES_MODEL, "stream": True, "input": [], "tools": []}).encode()
    with FakeUpstream(echoing(responses_sse)) as upstream:
        with make_gateway(socket_dir, upstream.url, prices=WIRE_PRICES) as gateway:
            token = gateway.open_session("codex", wire="openai-responses", max_usd=0.006)
            claude = gateway.open_session("claude")
            connection = UnixHTTPConnection(gateway.socket_path)
            bearer = {"Authorization": f"Bearer {token}", "accept-encoding": "zstd,gzip"}
            status, headers, body = send(connection, "/v1/responses", bearer, codex_body)
            assert status == 200 and headers["content-type"] == "text/event-stream"
            assert KEY.encode() not in body and b"your key is KEY-MASKED-" in body and "x-echo" not in headers
            # The Codex token in Anthropic's own place is no credential; an Anthropic session's token tells its wire.
            status, headers, body = send(connection, "/v1/responses", {"x-api-key": token}, codex_body)
            assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"
            status, _, body = send(connection, "/v1/responses", {"Authorization": f"Bearer {claude}"}, codex_body)
            assert status == 404 and json.loads(body)["error"]["type"] == "not_found_error"
            status, _, body = send(connection, "/v1/messages", bearer, codex_body)
            assert status == 404 and json.loads(body)["error"]["type"] == "invalid_request_error"
            assert send(connection, "/v1/responses", bearer, codex_body)[0] == 200  # crosses the cap
            status, headers, body = send(connection, "/v1/responses", bearer, codex_body)
            assert status == 429 and headers["x-should-retry"] == "false"
            error = json.loads(body)["error"]
            assert error["type"] == error["code"] == "insufficient_quota" and "spend cap" in error["message"]
            assert len(upstream.received) == 2
    for request in upstream.received:
        sent = {name.lower(): value for name, value in request["headers"].items()}
        assert sent["authorization"] == f"Bearer {KEY}" and "x-api-key" not in sent
        assert sent["accept-encoding"] == "identity" and request["path"] == "/v1/responses"
    assert_token_never_upstream(upstream, [token, claude])
    ledger = gateway.ledger(token)
    assert ledger["wire"] == "openai-responses" and gateway.ledger(claude)["wire"] == "anthropic"
    ok, _, refused = ledger["requests"]
    assert (ok["kind"], ok["model"], ok["served_model"], ok["request_id"]) == (
        "messages",
        RESPONSES_MODEL,
        SERVED_RESPONSES_MODEL,
        "req_wire_1",
    )
    assert ok["usage"] == {
        "input_tokens": 1000,
        "output_tokens": 300,
        "cache_read_input_tokens": 4000,
        "cache_creation_input_tokens": 0,
        "cache_creation_5m_input_tokens": None,
        "cache_creation_1h_input_tokens": None,
    }
    assert ok["cost_usd"] == pytest.approx((1000 * 1.25 + 300 * 10.0 + 4000 * 0.125) / 1e6)  # the served model's price
    assert (refused["outcome"], refused["status"], refused["refused"]) == ("refused", 429, "session-cap")
    assert KEY not in json.dumps(ledger) and token not in json.dumps(ledger)
    validate({"schema": "ledger/v1", "sessions": [{"role": "work", **ledger}]}, "ledger")


def test_a_gemini_session_takes_its_token_from_the_query_and_never_forwards_it(socket_dir):
    gemini_body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}).encode()
    with FakeUpstream(echoing(gemini_sse)) as upstream:
        with make_gateway(socket_dir, upstream.url, prices=WIRE_PRICES) as gateway:
            token = gateway.open_session("gemini", wire="gemini", max_usd=0.012)
            claude = gateway.open_session("claude")
            connection = UnixHTTPConnection(gateway.socket_path)
            by_query = f"{GEMINI_ROUTE}?alt=sse&key={token}"
            status, headers, body = send(connection, by_query, {}, gemini_body)
            assert status == 200 and KEY.encode() not in body and b"KEY-MASKED-" in body
            count_route = f"/v1beta/models/{GEMINI_MODEL}:countTokens?key={token}"
            status, _, body = send(connection, count_route, {}, gemini_body)
            assert status == 200 and json.loads(body) == {"totalTokens": 31}  # free, and under the cap still
            by_header = {"x-goog-api-key": token, "Authorization": "Bearer stray-credential"}
            assert send(connection, f"{GEMINI_ROUTE}?alt=sse", by_header, gemini_body)[0] == 200  # crosses the cap
            status, headers, body = send(connection, by_query, {}, gemini_body)
            assert status == 400 and headers["x-should-retry"] == "false"
            assert json.loads(body)["error"]["status"] == "FAILED_PRECONDITION"
            # A count is free, but past the cap it is refused like every other request (never forwarded uncapped).
            assert send(connection, count_route, {}, gemini_body)[0] == 400
            # An Anthropic session's token on a Gemini route, or no token at all: 401 in Gemini's shape.
            for credentials in ({"x-goog-api-key": claude}, {}):
                status, _, body = send(connection, f"{GEMINI_ROUTE}?alt=sse", credentials, gemini_body)
                assert status == 401 and json.loads(body)["error"]["status"] == "UNAUTHENTICATED"
            assert send(connection, f"{GEMINI_ROUTE}?alt=sse", {"x-api-key": token}, gemini_body)[0] == 401
    assert [request["path"] for request in upstream.received] == [
        f"{GEMINI_ROUTE}?alt=sse",
        f"/v1beta/models/{GEMINI_MODEL}:countTokens",
        f"{GEMINI_ROUTE}?alt=sse",
    ]
    for request in upstream.received:
        sent = {name.lower(): value for name, value in request["headers"].items()}
        assert sent["x-goog-api-key"] == KEY and "authorization" not in sent
    assert_token_never_upstream(upstream, [token, claude])
    ledger = gateway.ledger(token)
    assert ledger["wire"] == "gemini"
    first, counted, _second, refused, refused_count = ledger["requests"]
    assert first["path"] == f"{GEMINI_ROUTE}?alt=sse" and token not in json.dumps(ledger)
    assert (first["model"], first["served_model"], first["stream"]) == (GEMINI_MODEL, GEMINI_MODEL, True)
    assert first["usage"] == {
        "input_tokens": 1000,
        "output_tokens": 400,  # candidates and thoughts
        "cache_read_input_tokens": 6000,
        "cache_creation_input_tokens": 0,
        "cache_creation_5m_input_tokens": None,
        "cache_creation_1h_input_tokens": None,
    }
    assert first["cost_usd"] == pytest.approx((1000 * 2.0 + 400 * 12.0 + 6000 * 0.5) / 1e6)
    assert (counted["kind"], counted["cost_usd"]) == ("count_tokens", 0.0)
    assert (refused["outcome"], refused["status"]) == ("refused", 400)
    assert (refused_count["kind"], refused_count["refused"]) == ("count_tokens", "session-cap")
    assert ledger["totals"]["cost_usd"] == pytest.approx(2 * first["cost_usd"])
    validate({"schema": "ledger/v1", "sessions": [{"role": "work", **ledger}]}, "ledger")


@pytest.mark.parametrize(
    ("wire", "route", "credentials", "body", "status"),
    [
        ("openai-responses", "/v1/responses", "bearer", {"model": "gpt-unpriced", "stream": True, "input": []}, 429),
        (
            "gemini",
            "/v1beta/models/gemini-unpriced:streamGenerateContent?alt=sse",
            "x-goog-api-key",
            {"contents": []},
            400,
        ),
    ],
)
def test_every_wire_refuses_a_model_it_cannot_price_in_its_own_shape(
    socket_dir, wire, route, credentials, body, status
):
    with FakeUpstream(echoing(responses_sse if wire == "openai-responses" else gemini_sse)) as upstream:
        with make_gateway(socket_dir, upstream.url, prices=WIRE_PRICES) as gateway:
            token = gateway.open_session("unpriced", wire=wire)
            headers = {"Authorization": f"Bearer {token}"} if credentials == "bearer" else {credentials: token}
            connection = UnixHTTPConnection(gateway.socket_path)
            answer, sent, text = send(connection, route, headers, json.dumps(body).encode())
            assert answer == status and sent["x-should-retry"] == "false"
            assert "-unpriced" in text.decode() and "no price" in text.decode()
    assert upstream.received == []
    (entry,) = gateway.ledger(token)["requests"]
    assert (entry["outcome"], entry["refused"], entry["model"]) == (
        "refused",
        "model-unpriced",
        body.get("model", "gemini-unpriced"),
    )


def test_a_request_without_a_live_token_is_refused_before_its_body_is_read(socket_dir):
    with make_gateway(socket_dir, "http://127.0.0.1:9") as gateway:
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.settimeout(WAIT_S)
        raw.connect(str(gateway.socket_path))
        # Headers that announce the largest body the gateway takes, and not a byte of it: the answer comes anyway.
        raw.sendall(
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: sbx-session-made-up\r\n"
            + f"Content-Length: {gw.MAX_REQUEST_BYTES}\r\n\r\n".encode()
        )
        answer = b""
        while chunk := raw.recv(65536):  # the gateway closes the connection after its answer
            answer += chunk
        raw.close()
        assert answer.startswith(b"HTTP/1.1 401") and b"Connection: close" in answer
        assert gateway.stats()["unauthorized"] == 1


def test_errors_without_a_session_take_the_shape_of_the_wire_whose_route_it_is(socket_dir):
    with make_gateway(socket_dir, f"http://127.0.0.1:{closed_port()}", prices=WIRE_PRICES) as gateway:
        connection = UnixHTTPConnection(gateway.socket_path)
        token = gateway.open_session("down", wire="gemini")
        status, headers, body = send(connection, f"{GEMINI_ROUTE}?alt=sse", {"x-goog-api-key": token})
        assert status == 502 and "x-should-retry" not in headers  # the CLI may retry a transient failure
        assert json.loads(body)["error"]["status"] == "UNAVAILABLE"
        assert gateway.ledger(token)["requests"][0]["outcome"] == "upstream-failure"
        status, _, body = send(connection, "/v1/responses", {})
        assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"
        status, _, body = send(connection, f"{GEMINI_ROUTE}?alt=sse", {})
        assert status == 401 and json.loads(body)["error"]["code"] == 401
        status, _, body = send(connection, "/v1/elsewhere", {})
        assert status == 401 and json.loads(body)["error"]["type"] == "authentication_error"
        assert gateway.stats()["unauthorized"] == 3
        with pytest.raises(GatewayError, match="unknown wire"):
            gateway.open_session("s", wire="chat-completions")


# One conversation turn of each wire through the gateway to the real scripted model: (wire, route, credentials, body).
SCRIPTED_WIRES = {
    "anthropic": (
        "/v1/messages",
        lambda token: {"x-api-key": token},
        {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "go"}], "tools": [{"name": "Bash"}]},
    ),
    "openai-responses": (
        "/v1/responses",
        lambda token: {"Authorization": f"Bearer {token}"},
        {
            "model": RESPONSES_MODEL,
            "stream": True,
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}],
            "tools": [{"type": "function", "name": "shell"}],
        },
    ),
    "gemini": (
        f"{GEMINI_ROUTE}?alt=sse",
        lambda token: {"x-goog-api-key": token},
        {
            "contents": [{"role": "user", "parts": [{"text": "go"}]}],
            "tools": [{"functionDeclarations": [{"name": "sh"}]}],
        },
    ),
}


@pytest.mark.parametrize("wire", sorted(SCRIPTED_WIRES))
def test_each_wire_of_the_scripted_model_is_metered_and_priced_and_a_malformed_request_refused(socket_dir, wire):
    """The scripted model answers in the session's wire; the gateway's ledger has the usage that wire reported, in
    the canonical kinds, priced with the price table; a body that is no request of the wire is refused (400, free)."""
    from skillbench.execution.scripted_model import ScriptedModel
    from skillbench.execution.wires import wire as wire_api

    usage = {
        "input_tokens": 700,
        "output_tokens": 90,
        "cache_read_input_tokens": 3000,
        "cache_creation_input_tokens": 0,
    }
    steps = [{"text": "running", "tools": [{"name": "Bash", "input": {"command": "ls"}}], "usage": usage}]
    names = {"anthropic": "Bash", "openai-responses": "shell", "gemini": "sh"}
    route, credentials, body = SCRIPTED_WIRES[wire]
    prices = {**PRICES, **WIRE_PRICES}
    model_id = {"anthropic": MODEL, "openai-responses": RESPONSES_MODEL, "gemini": GEMINI_MODEL}[wire]
    with ScriptedModel(steps, defaults={}, wire=wire, tool_form=lambda _name, args: (names[wire], args)) as model:
        with make_gateway(socket_dir, "http://127.0.0.1:9", prices=prices) as gateway:
            assert model.base_url is not None
            token = gateway.open_session("s", upstream=model.base_url, wire=wire)
            connection = UnixHTTPConnection(gateway.socket_path)
            status, headers, payload = send(connection, route, credentials(token), json.dumps(body).encode())
            assert status == 200 and headers["content-type"].startswith("text/event-stream"), payload
            assert names[wire].encode() in payload
            # A priced model, but no conversation of the wire: the scripted model's own refusal.
            malformed = json.dumps({"model": model_id, "no": "conversation"}).encode()
            status, _, payload = send(connection, route, credentials(token), malformed)
            assert status == 400 and "scripted model: body must be a JSON object with" in payload.decode()
            ledger = gateway.close_session(token)
    answered, malformed = ledger["requests"]
    expected = wire_api(wire).canonical_usage(usage)
    assert answered["usage"] == expected and answered["outcome"] == "ok" and answered["model"] == model_id
    assert answered["cost_usd"] == pytest.approx(request_cost(expected, prices[model_id]))
    assert (malformed["outcome"], malformed["status"], malformed["cost_usd"]) == ("upstream-error", 400, 0.0)
    assert ledger["totals"]["cost_usd"] == pytest.approx(answered["cost_usd"]) and ledger["wire"] == wire
    validate({"schema": "ledger/v1", "sessions": [{"role": "work", **ledger}]}, "ledger")


def test_closing_a_session_waits_for_its_answers_to_settle_but_not_for_an_upstream_that_hangs(socket_dir):
    """The last answer reaches the CLI a moment before its entry settles: closing right after it still finds it
    settled (finished before `closed_at`). A request still waiting on the upstream does not hold the close up past
    the settle wait; it is in the ledger as in flight."""
    released = threading.Event()

    def gate(index: int) -> None:
        if index == 1:
            assert released.wait(WAIT_S)

    with FakeUpstream(always(lambda: Reply(sse_message(USAGE), gate=gate))) as upstream:
        with make_gateway(socket_dir, upstream.url) as gateway:
            token = gateway.open_session("hung")
            connection = UnixHTTPConnection(gateway.socket_path)
            connection.request("POST", "/v1/messages", body=messages_body(), headers={"x-api-key": token})
            response = connection.getresponse()
            assert response.read1(65536).startswith(b"event: message_start")
            ledger = gateway.close_session(token, settle_wait_s=0.2)
            assert ledger["open"] is False and ledger["requests"][0]["outcome"] == "in-flight"
            released.set()
            response.read()
            settled = gateway.open_session("settled")
            for _ in range(5):
                status, _, _ = post(UnixHTTPConnection(gateway.socket_path), settled)
                assert status == 200
            closed = gateway.close_session(settled)
    assert [entry["outcome"] for entry in closed["requests"]] == ["ok"] * 5
    assert all(entry["finished_at"] <= closed["closed_at"] for entry in closed["requests"])
    assert closed["totals"]["cost_usd"] is not None
