"""tritonctl perf against a real ``tritonctl serve`` on free loopback ports."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from helpers.sequence_models import write_accumulator
from helpers.serve_models import IDENTITY_PY, write_add_sub, write_onnx_only, write_python_model
from tritonctl.perf.options import PerfError, PerfOptions
from tritonctl.perf.run import run_perf
from tritonctl.perf.report import CSV_COLUMNS
from helpers.cli_runner import cli
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

# A decoupled model: RESPONSES responses per request, DELAY_S apart, then the final flag alone; a
# negative INPUT0 makes its second response an error (the request goes on to its final flag).
RESPONSES, DELAY_S = 3, 0.004
STREAMER_PY = f"""
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            value = float(pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()[0])
            for step in range({RESPONSES}):
                time.sleep({DELAY_S})
                if value < 0 and step == 1:
                    sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("step 1 failed")))
                else:
                    out = pb_utils.Tensor("OUTPUT0", np.array([step], np.float32))
                    sender.send(pb_utils.InferenceResponse([out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

# A wide stability band: a level that is not stable ends a sweep (as perf_analyzer's does), and these
# tests are not about stability (the rule has tests of its own).
FAST = {"measurement_interval_ms": 120, "stability_percentage": 1000, "max_trials": 5}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("perf") / "repo"
    write_add_sub(repo, extra="dynamic_batching { max_queue_delay_microseconds: 500 }")
    write_onnx_only(repo)  # X: [batch, n] with n variable
    # OUTPUT: the running total of INPUT over a sequence, four batch slots. Sequences left open hold
    # their slot for the idle time, a minute here: each run must end the sequences it started (as
    # perf_analyzer does), or the next run waits for a slot and measures nothing.
    write_accumulator(repo, "accumulator", idle_us=60_000_000)
    write_python_model(repo, "decoupled", """
        max_batch_size: 0
        model_transaction_policy { decoupled: true }
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
        instance_group [ { kind: KIND_CPU count: 2 } ]
        """, STREAMER_PY)
    write_python_model(repo, "slow", """
        max_batch_size: 0
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
        """, IDENTITY_PY.replace("    def execute(self, requests):\n",
                                 "    def execute(self, requests):\n        import time\n        time.sleep(0.004)\n"))
    running = BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0)).start()
    yield running
    running.stop()


def url(server, protocol: str) -> str:
    return server.http_url if protocol == "http" else server.grpc_url


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_concurrency_sweep_counts_agree_with_server_statistics(server, protocol):
    result = run_perf(PerfOptions("add_sub", url=url(server, protocol), protocol=protocol, concurrency=(1, 3),
                                  batch_size=2, warmup_requests=5, **FAST))
    assert [level.concurrency for level in result.levels] == [1, 3]
    # Every request sent, warm-up and all windows included, is one success on the server.
    assert result.server_total is not None and result.total_sent == result.server_total.success_count
    assert result.server_total.inference_count == 2 * result.total_sent  # batch 2
    for level in result.levels:
        assert level.request_count > 0 and level.error_count == 0 and level.throughput > 0
        p = level.percentiles_us
        assert 0 < p[50] <= p[90] <= p[95] <= p[99]
        # Window edges are read on the client, then the statistics: at most the requests in flight differ.
        assert abs(level.server.success_count - level.request_count) <= 3 * level.concurrency
        assert level.server_compute_us > 0 and level.server_queue_us >= 0


def test_request_rate_with_count_windows(server):
    result = run_perf(PerfOptions("add_sub", url=server.grpc_url, protocol="grpc", concurrency=(),
                                  request_rates=(150.0,), request_distribution="poisson",
                                  measurement_mode="count_windows", measurement_request_count=20,
                                  stability_percentage=50, max_trials=4))
    level = result.levels[0]
    assert level.request_rate == 150.0 and level.concurrency is None
    assert level.request_count >= 3 * 20 if level.stable else level.request_count >= 20
    assert 30 < level.throughput < 400
    assert result.total_sent == result.server_total.success_count


def test_variable_dims_need_shape(server):
    options = PerfOptions("onnx_only", url=server.http_url, **FAST)
    with pytest.raises(PerfError, match="variable dims .*--shape X:1"):
        run_perf(options)
    result = run_perf(PerfOptions("onnx_only", url=server.http_url, shapes={"X": (6,)}, input_data="zero", **FAST))
    assert result.levels[0].request_count > 0 and result.total_sent == result.server_total.success_count


def test_json_input_data(server, tmp_path):
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"data": [{"INPUT0": [1, 2, 3, 4], "INPUT1": [0, 0, 0, 0]},
                                         {"INPUT0": [5, 6, 7, 8], "INPUT1": [1, 1, 1, 1]}]}))
    result = run_perf(PerfOptions("add_sub", url=server.http_url, input_data=str(data), **FAST))
    assert result.levels[0].error_count == 0 and result.levels[0].request_count > 0


def test_unknown_model_and_unreachable_server(server):
    with pytest.raises(PerfError, match="cannot read model 'nope'"):
        run_perf(PerfOptions("nope", url=server.http_url, **FAST))
    with pytest.raises(PerfError, match="cannot read model 'add_sub' from grpc://127.0.0.1:1"):
        run_perf(PerfOptions("add_sub", url="127.0.0.1:1", protocol="grpc", request_timeout_s=2, **FAST))


def test_cli_writes_csv_and_json(server, tmp_path, capsys):
    # A wide stability band: this test is about the files, and 120 ms windows on a busy machine
    # can miss a tighter one (the stability rule has tests of its own).
    csv_path, json_path = tmp_path / "out.csv", tmp_path / "out.json"
    code, out, err = cli(capsys, "perf", "-m", "add_sub", "-u", f"http://{server.http_url}",
                         "--concurrency-range", "1:2", "-p", "120", "-s", "500", "-r", "5",
                         "--csv", str(csv_path), "--json", str(json_path))
    assert code == 0, err
    assert "Conc" in out and "p99" in out and "Stable" in out
    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert tuple(rows[0]) == CSV_COLUMNS and [r["concurrency"] for r in rows] == ["1", "2"]
    assert all(float(r["throughput_infer_per_s"]) > 0 for r in rows)
    # The table fits an 80-column terminal without cutting a number or a header. It shows one
    # decimal of the throughput the CSV has to three, so the two may round apart by 0.1.
    shown = [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\.\d\b", out)]
    assert all(any(abs(v - float(r["throughput_infer_per_s"])) <= 0.051 for v in shown) for r in rows), out
    assert "…" not in out
    document = json.loads(json_path.read_text())
    assert document["model"] == "add_sub" and len(document["levels"]) == 2
    assert document["total_requests_sent"] == document["server_requests_total"]

    code, out, _ = cli(capsys, "perf", "-m", "add_sub", "-u", server.grpc_url, "-i", "grpc",
                       "--request-rate-range", "100", "-p", "150", "-s", "500", "-r", "4", "--json", "-")
    assert json.loads(out)["levels"][0]["request_rate"] == 100


# Windows long enough, and a stability band wide enough, that a machine busy with other work still
# gives this test its result: it is about replaying the trace, not about stability.
LOOSE = ("-p", "300", "-s", "5000", "-r", "10")


def test_cli_replays_a_request_intervals_file(server, tmp_path, capsys):
    trace = tmp_path / "trace.txt"
    trace.write_text("4000\n\n2000\n14000\n")  # 3 sends per 20 ms: 150/s on average, in a loop
    code, out, err = cli(capsys, "perf", "-m", "add_sub", "-u", server.grpc_url, "-i", "grpc",
                         "--request-intervals", str(trace), *LOOSE, "--json", "-")
    assert code == 0, err
    document = json.loads(out)
    assert document["request_intervals"] == {"count": 3, "total_us": 20000, "mean_rate_per_s": 150.0}
    (level,) = document["levels"]
    assert level["concurrency"] is None and level["request_rate"] is None and level["error_count"] == 0
    assert level["throughput_infer_per_s"] > 0  # its rate depends on the machine's load, not on the trace alone
    assert document["total_requests_sent"] == document["server_requests_total"]

    code, out, err = cli(capsys, "perf", "-m", "add_sub", "-u", server.http_url, "--request-intervals", str(trace),
                         *LOOSE)
    assert code == 0, err
    assert "trace of 3 intervals, mean 150/s" in out


@pytest.mark.parametrize("args, fragment", [
    (["--request-intervals", "missing.txt"], "--request-intervals missing.txt: no such file"),
    (["--request-intervals", "BAD"], "BAD:2: '10 ms' is not a whole number of microseconds"),
    (["--request-intervals", "BAD", "--concurrency-range", "2"],
     "one of --concurrency-range, --request-intervals"),
    (["--concurrency-range", "0:2"], "--concurrency-range '0:2'"),
    (["--concurrency-range", "1", "--request-rate-range", "10"], "more than one inference load mode"),
    (["--shape", "INPUT0"], "NAME:DIMS"),
    (["--shape", "NOPE:3"], "input 'NOPE', which model 'add_sub' does not have"),
    (["-b", "64"], "max_batch_size 8"),
    (["--input-data", "missing.json"], "--input-data 'missing.json'"),
    (["--input-data", "EXTRA"], "entry 0: 'EXTRA' is not an input of model 'add_sub' (inputs: INPUT0, INPUT1)"),
    (["--input-data", "SHORT"], "entry 1: input 'INPUT1' has 2 values, but its shape [4] needs 4"),
    (["--string-length", "-1"], "--string-length must be at least 0"),
    (["--sequence-id-range", "5:2"], "--sequence-id-range '5:2': needs 1 <= START < END"),
])
def test_cli_bad_arguments(server, capsys, tmp_path, args, fragment):
    bad = tmp_path / "BAD"
    bad.write_text("1000\n10 ms\n")
    entry = {"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 2, 3, 4]}
    (tmp_path / "EXTRA").write_text(json.dumps({"data": [dict(entry, EXTRA=[1])]}))
    (tmp_path / "SHORT").write_text(json.dumps({"data": [entry, dict(entry, INPUT1=[1, 2])]}))
    args = [str(tmp_path / arg) if arg in ("BAD", "EXTRA", "SHORT") else arg for arg in args]
    fragment = fragment.replace("BAD", str(bad))
    code, _, err = cli(capsys, "perf", "-m", "add_sub", "-u", server.http_url, "-p", "100", *args)
    assert code == 2 and fragment in err


def test_sequence_model_plays_each_stream_as_one_sequence_and_validates_it(server, tmp_path):
    """perf_analyzer's streams: every stream is one sequence (start and end flagged, one correlation
    id), so the running totals in validation_data hold only if the steps of a stream stay together."""
    streams = [[{"INPUT": [1]}, {"INPUT": [2]}, {"INPUT": [3]}], [{"INPUT": [10]}, {"INPUT": [20]}]]
    totals = [[{"OUTPUT": [1]}, {"OUTPUT": [3]}, {"OUTPUT": [6]}], [{"OUTPUT": [10]}, {"OUTPUT": [30]}]]
    data = tmp_path / "streams.json"
    data.write_text(json.dumps({"data": streams, "validation_data": totals}))
    for protocol, streaming in (("http", False), ("grpc", False), ("grpc", True)):
        result = run_perf(PerfOptions("accumulator", url=url(server, protocol), protocol=protocol, concurrency=(3,),
                                      input_data=str(data), streaming=streaming, **FAST))
        level = result.levels[0]
        assert level.error_count == 0 and level.request_count > 0, result.warnings
    totals[0][2] = {"OUTPUT": [7]}
    data.write_text(json.dumps({"data": streams, "validation_data": totals}))
    result = run_perf(PerfOptions("accumulator", url=server.http_url, input_data=str(data), **FAST))
    assert result.levels[0].error_count > 0
    assert any("output 'OUTPUT' does not match validation_data: expected [7], got [6]" in w for w in result.warnings)


def test_sequence_model_with_generated_data(server):
    result = run_perf(PerfOptions("accumulator", url=server.grpc_url, protocol="grpc", concurrency=(2,),
                                  sequence_length=4, **FAST))
    assert result.levels[0].error_count == 0 and result.total_sent == result.server_total.success_count
    with pytest.raises(PerfError, match="sequence batcher.*use -b 1"):
        run_perf(PerfOptions("accumulator", url=server.http_url, batch_size=2, **FAST))


def test_validation_data_mismatch_fails_every_request(server, tmp_path):
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"data": [{"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1]}],
                                "validation_data": [{"OUTPUT0": [2, 3, 4, 5], "OUTPUT1": [0, 1, 2, 4]}]}))
    with pytest.raises(PerfError, match="output 'OUTPUT1' does not match validation_data"):
        run_perf(PerfOptions("add_sub", url=server.http_url, input_data=str(data), **FAST))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_decoupled_model_needs_streaming(server, protocol):
    with pytest.raises(PerfError, match="'decoupled' is decoupled .*Decoupled models must be run with `--async` and "
                                        "`--streaming`"):
        run_perf(PerfOptions("decoupled", url=url(server, protocol), protocol=protocol, **FAST))


def test_streaming_measures_a_decoupled_model_to_its_last_response(server, capsys, tmp_path):
    export, report = tmp_path / "profile.json", tmp_path / "perf.csv"
    document, _ = perf_json(capsys, server, "-m", "decoupled", "--streaming", "--concurrency-range", "2",
                            "--profile-export-file", str(export), "-f", str(report), protocol="grpc")
    (level,) = document["levels"]
    assert document["streaming"] and level["error_count"] == 0 and level["request_count"] > 0
    assert level["responses_per_request"] == RESPONSES and level["response_count"] == RESPONSES * level["request_count"]
    assert level["p50_latency_us"] >= RESPONSES * DELAY_S * 1e6  # to the last response, not the first
    assert DELAY_S * 1e6 <= level["avg_first_response_us"] < level["p50_latency_us"]
    assert level["avg_inter_response_us"] >= DELAY_S * 1e6 * 0.9
    assert level["response_throughput_per_s"] == pytest.approx(RESPONSES * level["throughput_infer_per_s"], rel=0.01)
    assert document["total_requests_sent"] == document["server_requests_total"]
    # The export: every response's arrival, then the empty final response, as perf_analyzer records them.
    requests = json.loads(export.read_text())["experiments"][0]["requests"]
    assert requests and all(len(r["response_timestamps"]) == RESPONSES + 1 and len(r["response_outputs"]) ==
                            RESPONSES + 1 and r["timestamp"] < r["response_timestamps"][0] and
                            r["response_timestamps"] == sorted(r["response_timestamps"]) for r in requests)
    header, row = list(csv.reader(io.StringIO(report.read_text())))[:2]
    assert header[:4] == ["Concurrency", "Inferences/Second", "Response Throughput", "Client Send"]
    assert float(row[2]) == pytest.approx(RESPONSES * float(row[1]), rel=0.01)

    result = run_perf(PerfOptions("decoupled", url=server.grpc_url, protocol="grpc", streaming=True, concurrency=(),
                                  request_rates=(60.0,), **FAST))
    assert result.levels[0].request_count > 0 and result.levels[0].responses.responses == (
        RESPONSES * result.levels[0].request_count)


def test_an_error_inside_the_stream_fails_its_request(server, tmp_path):
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"data": [{"INPUT0": [-1]}, {"INPUT0": [1]}]}))  # every other request fails
    result = run_perf(PerfOptions("decoupled", url=server.grpc_url, protocol="grpc", streaming=True,
                                  input_data=str(data), **FAST))
    level = result.levels[0]
    assert level.error_count > 0 and level.request_count > 0
    assert level.responses.responses == RESPONSES * level.request_count  # the failed ones are not counted
    (warning,) = [w for w in result.warnings if "failed" in w]
    assert warning.endswith(f"{level.error_count} requests failed (first error: step 1 failed)")


def test_streaming_an_ordinary_model(server):
    result = run_perf(PerfOptions("add_sub", url=server.grpc_url, protocol="grpc", streaming=True, **FAST))
    level = result.levels[0]
    assert level.error_count == 0 and level.responses.responses == level.request_count > 0
    assert result.total_sent == result.server_total.success_count


def test_cli_writes_perf_analyzer_csv(server, tmp_path, capsys):
    report = tmp_path / "perf.csv"
    code, _, err = cli(capsys, "perf", "-m", "add_sub", "-u", server.http_url, "--concurrency-range", "1:2",
                       "--percentile", "85", "-p", "120", "-s", "500", "-r", "5", "-f", str(report), "--verbose-csv")
    assert code == 0, err
    rows = list(csv.reader(io.StringIO(report.read_text())))
    assert rows[0] == ["Concurrency", "Inferences/Second", "Client Send", "Network+Server Send/Recv", "Server Queue",
                       "Server Compute Input", "Server Compute Infer", "Server Compute Output", "Client Recv",
                       "p50 latency", "p85 latency", "p90 latency", "p95 latency", "p99 latency",
                       "request/response", "response wait"]
    assert sorted(r[0] for r in rows[1:]) == ["1", "2"]
    throughputs = [float(r[1]) for r in rows[1:]]
    assert throughputs == sorted(throughputs) and all(t > 0 for t in throughputs)
    assert all(int(r[9]) <= int(r[10]) <= int(r[11]) <= int(r[13]) for r in rows[1:])

    code, out, err = cli(capsys, "perf", "-m", "add_sub", "-u", server.grpc_url, "-i", "grpc", "--request-rate-range",
                         "100", "-p", "150", "-s", "500", "-r", "4", "-f", "-")
    assert code == 0, err
    assert out.splitlines()[0].startswith("Request Rate,Inferences/Second,Client Send,") and out.splitlines()[1][:4] == "100,"



# perf_analyzer command lines, as its documentation and Triton's QA (qa/L0_perf_analyzer) write them.
# 100 ms windows, any spread taken as stable; up to 5 windows, as a window of a loaded machine can
# complete no request (perf_analyzer's stability needs requests in each of the last 3)
QUICK = ("-p", "100", "-s", "1000", "-r", "5")


def perf_json(capsys, server, *args, protocol="http"):
    code, out, err = cli(capsys, "perf", "-u", url(server, protocol), "-i", protocol.upper(), *QUICK, *args,
                         "--json", "-")
    assert code == 0, err
    return json.loads(out), err


def test_perf_analyzer_qa_command_lines(server, capsys):
    # -t (deprecated concurrency), -a, -v, --max-threads, -z, --shared-memory=none, -b 1, attached values
    document, _ = perf_json(capsys, server, "-v", "-m", "add_sub", "-t2", "-b", "1", "-a", "--max-threads", "4",
                            "-z", "--shared-memory=none", protocol="grpc")
    assert [level["concurrency"] for level in document["levels"]] == [2]
    # -d -t 1 -c 3: from -t up to -c
    document, _ = perf_json(capsys, server, "-m", "add_sub", "-d", "-t", "1", "-c", "3")
    assert [level["concurrency"] for level in document["levels"]] == [1, 2, 3]
    # --request-count: exactly that many requests, one window
    document, _ = perf_json(capsys, server, "-m", "add_sub", "--concurrency-range", "2", "--request-count", "30")
    assert document["levels"][0]["request_count"] == 30 and document["levels"][0]["windows"] == 1
    assert document["total_requests_sent"] == document["server_requests_total"] == 30


def test_latency_threshold_ends_the_sweep_and_binary_search(server, capsys):
    """slow answers in 4 ms or more: -l 3 is reached at once, -l 1000 never."""
    document, err = perf_json(capsys, server, "-m", "slow", "--concurrency-range", "1:0:1", "-l", "3")
    assert [level["concurrency"] for level in document["levels"]] == [1]
    assert "reached the --latency-threshold of 3 ms" in err
    document, _ = perf_json(capsys, server, "-m", "slow", "--binary-search", "--concurrency-range", "1:4:1",
                            "-l", "1000", "--percentile", "99")
    assert [level["concurrency"] for level in document["levels"]] == [1, 4]  # the end is under: nothing to search
    document, _ = perf_json(capsys, server, "-m", "slow", "--binary-search", "--request-rate-range", "20:40:10",
                            "-l", "3")
    assert [level["request_rate"] for level in document["levels"]] == [20]  # the start is over: nothing to search


def test_repeated_input_data_json_tensors_compression_and_parameters(server, capsys, tmp_path):
    entry = {"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1]}
    expected = {"OUTPUT0": [2, 3, 4, 5], "OUTPUT1": [0, 1, 2, 3]}
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"data": [entry], "validation_data": [expected]}))
    second.write_text(json.dumps({"data": [dict(entry, INPUT1=[0, 0, 0, 0])],
                                  "validation_data": [{"OUTPUT0": [1, 2, 3, 4], "OUTPUT1": [1, 2, 3, 4]}]}))
    document, _ = perf_json(capsys, server, "-m", "add_sub", "--input-data", str(first), "--input-data", str(second),
                            "--input-tensor-format", "json", "--output-tensor-format", "json", "-b", "2")
    assert document["levels"][0]["error_count"] == 0
    document, _ = perf_json(capsys, server, "-m", "add_sub", f"--input-data={first}", "--grpc-compression-algorithm",
                            "gzip", "--request-parameter", "priority_hint:1:int", protocol="grpc")
    assert document["levels"][0]["error_count"] == 0 and document["levels"][0]["request_count"] > 0


def test_profile_export_file_as_genai_perf_reads_it(server, capsys, tmp_path):
    export = tmp_path / "profile_export.json"
    perf_json(capsys, server, "-m", "accumulator", "--concurrency-range", "1:2", "--profile-export-file", str(export))
    document = json.loads(export.read_text())
    assert [e["experiment"] for e in document["experiments"]] == [{"mode": "concurrency", "value": 1},
                                                                  {"mode": "concurrency", "value": 2}]
    assert isinstance(document["version"], str) and document["service_kind"] == "triton"
    for experiment in document["experiments"]:
        bounds = experiment["window_boundaries"]
        assert len(bounds) == len(set(bounds)) >= 2 and bounds == sorted(bounds)
        assert experiment["requests"] and all(
            r["timestamp"] <= r["response_timestamps"][0] for r in experiment["requests"])
    code, _, err = cli(capsys, "perf", "-m", "add_sub", "-u", server.http_url, "--profile-export-file", str(export))
    assert code == 2 and "Path must not already exist" in err


@pytest.mark.parametrize("args, fragment", [
    (["--streaming"], "Streaming is only allowed with gRPC protocol"),
    (["--streaming", "-i", "grpc", "--sync"], "can not use streaming with synchronous API"),
    (["--periodic-concurrency-range", "1:4"], "perf_analyzer's --periodic-concurrency-range is not supported"),
    (["--shared-memory", "cuda"], "--shared-memory cuda is not supported"),
    (["--ssl-grpc-use-ssl"], "TLS is not supported"),
    (["-i", "tcp"], "either HTTP or gRPC"),
    (["--async", "--sync"], "Cannot specify --async and --sync simultaneously"),
    (["--grpc-compression-algorithm", "gzip"], "only allowed with gRPC protocol"),
    (["--concurrency-range", "1:0"], "latency limit can not be both 0"),
    (["--binary-search", "--concurrency-range", "1:4", "-l", "0"], "cannot be 0 for binary search"),
    (["-t", "2", "--concurrency-range", "1"], "deprecated options -t, -c and -d"),
    (["--measurment-interval", "5"], "no such option: --measurment-interval (did you mean --measurement-interval?)"),
    (["-m", "accumulator", "--sequence-id-range", "1:3", "--concurrency-range", "4"], "sequence id collision"),
    (["--trace-level", "TIMESTAMPS"], "cannot update the trace settings of model 'add_sub'"),
])
def test_perf_analyzer_options_refused_clearly(server, capsys, args, fragment):
    code, _, err = cli(capsys, "perf", "-m", "add_sub", "-u", server.http_url, *QUICK, *args)
    assert code == 2 and fragment in " ".join(err.split()) and "Traceback" not in err


def test_http_headers_reach_a_restricted_server(tmp_path, capsys):
    repo = tmp_path / "repo"
    write_add_sub(repo)
    restricted = BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0,
                                               http_restricted_api=["inference:perf-key=open"])).start()
    try:
        code, _, err = cli(capsys, "perf", "-m", "add_sub", "-u", restricted.http_url, *QUICK)
        assert code == 2 and "every request failed" in err
        code, _, err = cli(capsys, "perf", "-m", "add_sub", "-u", restricted.http_url, *QUICK, "-H", "perf-key:open")
        assert code == 0, err
    finally:
        restricted.stop()
