"""API keys: --api-key (repeatable) and --api-key-file."""

import openai
import pytest
import requests

from conftest import DEFAULT_FLAGS, MODEL_ID, assert_openai_error, start_server

V1_ROUTES = [
    ("GET", "/v1/models", None),
    ("POST", "/v1/completions", {"model": MODEL_ID, "prompt": "Hi", "max_tokens": 2}),
    ("POST", "/v1/chat/completions",
     {"model": MODEL_ID, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}),
]


@pytest.fixture(scope="module")
def keyed_server():
    srv = start_server(*DEFAULT_FLAGS, "--api-key", "k1", "--api-key", "k2")
    yield srv
    srv.stop()


def call(srv, method, path, body, headers=None):
    return requests.request(method, srv.url(path), json=body, headers=headers or {}, timeout=30)


def assert_401(r):
    err = assert_openai_error(r, 401, code="invalid_api_key")
    assert err["type"] == "authentication_error", err
    assert "k1" not in err["message"] and "k2" not in err["message"]  # no key leaks


@pytest.mark.parametrize("method,path,body", V1_ROUTES)
@pytest.mark.parametrize("headers", [
    {},
    {"Authorization": "Bearer wrong"},
    {"Authorization": "Bearer k1x"},
    {"Authorization": "Bearer k"},
    {"Authorization": "Bearer "},
    {"Authorization": "k1"},
    {"Authorization": "Basic k1"},
])
def test_missing_or_wrong_key(keyed_server, method, path, body, headers):
    assert_401(call(keyed_server, method, path, body, headers))


@pytest.mark.parametrize("method,path,body", V1_ROUTES)
@pytest.mark.parametrize("key", ["k1", "k2"])
def test_both_keys_work_raw(keyed_server, method, path, body, key):
    r = call(keyed_server, method, path, body, {"Authorization": f"Bearer {key}"})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("key", ["k1", "k2"])
def test_both_keys_work_openai_client(keyed_server, key):
    client = keyed_server.client(api_key=key)
    assert [m.id for m in client.models.list()] == [MODEL_ID]
    r = client.completions.create(model=MODEL_ID, prompt="Hi", max_tokens=2)
    assert r.usage.completion_tokens >= 1
    chunks = list(client.chat.completions.create(
        model=MODEL_ID, messages=[{"role": "user", "content": "Hi"}], max_tokens=2, stream=True))
    assert chunks[-1].choices[0].finish_reason is not None


def test_openai_client_wrong_key(keyed_server):
    client = keyed_server.client(api_key="nope")
    with pytest.raises(openai.AuthenticationError) as info:
        client.completions.create(model=MODEL_ID, prompt="Hi", max_tokens=2)
    assert info.value.status_code == 401
    assert info.value.code == "invalid_api_key"


@pytest.mark.parametrize("path", ["/health", "/metrics", "/", "/dashboard/data"])
def test_open_routes_need_no_key(keyed_server, path):
    r = requests.get(keyed_server.url(path), timeout=10)
    assert r.status_code == 200, (path, r.text[:200])


def test_no_keys_means_open(server):
    r = requests.get(server.url("/v1/models"), timeout=10)
    assert r.status_code == 200
    r = requests.get(server.url("/v1/models"), headers={"Authorization": "Bearer anything"},
                     timeout=10)
    assert r.status_code == 200


def test_api_key_file(tmp_path, make_server):
    key_file = tmp_path / "keys.txt"
    key_file.write_text("file-key-1\nfile-key-2\n")
    srv = make_server(*DEFAULT_FLAGS, "--api-key-file", str(key_file), "--api-key", "flag-key")
    for key in ["file-key-1", "file-key-2", "flag-key"]:
        r = requests.get(srv.url("/v1/models"), headers={"Authorization": f"Bearer {key}"},
                         timeout=10)
        assert r.status_code == 200, (key, r.text)
        assert srv.client(api_key=key).completions.create(
            model=MODEL_ID, prompt="Hi", max_tokens=1).choices
    for headers in [{}, {"Authorization": "Bearer file-key"},
                    {"Authorization": "Bearer file-key-1 file-key-2"}]:
        assert_401(requests.get(srv.url("/v1/models"), headers=headers, timeout=10))
