"""Issue 64, hole 3: a client replaced an operator's preset for everyone (`PUT /presets/small`
over `presets/small.yaml` hid the file; the next run took the client's prompt, seed and top-k).
File presets are the operator's: a client's preset of that name is a 409, and the file runs as it is."""

import time

import pytest

from ragray.store.history import History


SMALL = {"generation": {"backend": "scripted", "system_prompt": "Say BANANA."}, "retrieval": {"top_k": 2},
         "seed": 3, "name": "hijack"}


def test_a_client_preset_cannot_replace_or_delete_a_file_preset(client):
    r = client.put("/presets/small", json={"config": SMALL})
    assert r.status_code == 409, r.text
    assert "preset small: a file preset of the server's operator" in r.json()["error"]
    gone = client.delete("/presets/small")
    assert gone.status_code == 409 and "cannot be deleted" in gone.json()["error"]
    listed = [p for p in client.get("/presets").json() if p["name"] == "small"]
    assert len(listed) == 1 and listed[0]["source"] == "file"
    run = client.post("/runs", json={"command": "audit", "preset": "small", "overrides": ["audit.k=1"]}).json()
    status = _wait(client, run["run_id"])
    assert status["status"] == "done" and status["name"] == "small", status  # the operator's file ran


def test_a_database_preset_saved_before_the_file_appeared_does_not_shadow_it(client, served_config):
    # e.g. saved by an older ragray, or before the operator added the file: the file still wins
    History(served_config.history.url).save_preset("small", served_config.model_copy(update={"name": "hijack"}))
    assert client.get("/presets/small").json()["source"] == "file"
    listed = [p for p in client.get("/presets").json() if p["name"] == "small"]
    assert len(listed) == 1 and listed[0]["source"] == "file"
    run = client.post("/runs", json={"command": "audit", "preset": "small", "overrides": ["audit.k=1"]}).json()
    assert _wait(client, run["run_id"])["name"] == "small"


@pytest.mark.parametrize("name", ["mine", "small2"])
def test_a_client_may_still_save_its_own_names(client, name):
    assert client.put(f"/presets/{name}", json={"config": {"retrieval": {"top_k": 2}}}).status_code == 200
    assert client.delete(f"/presets/{name}").status_code == 204


def _wait(client, run_id, timeout=60):
    deadline = time.time() + timeout
    while (status := client.get(f"/runs/{run_id}").json())["status"] == "running" and time.time() < deadline:
        time.sleep(0.2)
    return status


def test_a_preset_read_back_can_be_saved_again(client):
    assert client.put("/presets/mine", json={"config": {"retrieval": {"top_k": 2}, "seed": 4}}).status_code == 200
    read = client.get("/presets/mine").json()
    assert read["settings"] == {"retrieval.top_k": 2, "seed": 4}
    assert client.put("/presets/copy", json={"config": read["settings"]}).status_code == 200
    assert client.get("/presets/copy").json()["settings"] == read["settings"]
