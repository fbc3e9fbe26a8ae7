"""The generate extension's requests and the answers of the real Triton 2.51 to them (recorded on
2026-11-27 from tritonserver 2.51.0 on the models of helpers/generate_models.py): the status, the
Content-Type and the whole body. tests/integration/serve/test_serve_generate.py requires the same
from ``tritonctl serve``, and tests/integration/test_triton_generate_differential.py checks them
against a live Triton where one is set up.

Where Triton answers 500 it reports a client's fault (JSON it cannot read, a value of the wrong
type) as its own; ``tritonctl serve`` answers those 400 with the same body (``expected_status``;
docs/compatibility.md)."""

from __future__ import annotations

from typing import NamedTuple

JSON = "application/json"
SSE = "text/event-stream; charset=utf-8"
DEEP_F32 = '{"F32": [' + '[' * 3000 + '1' + ']' * 3000 + ']}'
DEEP_PARAMETER = '{"x": ' + '[' * 3000 + ']' * 3000 + '}'


class Case(NamedTuple):
    route: str  # generate or generate_stream, after v2/models/MODEL/
    model: str
    status: int  # Triton's
    content_type: str
    body: str
    reply: str
    method: str = "POST"
    headers: tuple = ()

    @property
    def expected_status(self) -> int:
        return 400 if self.status == 500 else self.status

    @property
    def label(self) -> str:
        headers = f" {self.headers}" if self.headers else ""
        return f"{self.method} {self.route} {self.model} {self.body[:60]}{headers}"


CASES = [
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": "hello world", "STREAM": false}',
         '{"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}'),
    Case('generate_stream', 'mock_llm', 200, SSE,
         '{"PROMPT": ["hello world"], "STREAM": true, "REPETITION": 3}',
         'data: {"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}\n\ndata: {"TEXT":'
         '"hello world","model_name":"mock_llm","model_version":"1"}\n\ndata: {"TEXT":"hello world",'
         '"model_name":"mock_llm","model_version":"1"}\n\n'),
    Case('generate', 'mock_llm_nd', 200, JSON,
         '{"PROMPT": "hello world", "STREAM": false}',
         '{"TEXT":"hello world","model_name":"mock_llm_nd","model_version":"1"}'),
    Case('generate_stream', 'mock_llm_nd', 200, SSE,
         '{"PROMPT": "hello world", "STREAM": false}',
         'data: {"TEXT":"hello world","model_name":"mock_llm_nd","model_version":"1"}\n\n'),
    Case('generate', 'mock_llm_nd', 200, JSON,
         '{"PROMPT": "hello world", "STREAM": false, "REPETITION": 2}',
         '{"TEXT":["hello world","hello world"],"model_name":"mock_llm_nd","model_version":"1"}'),
    Case('generate', 'mock_llm_nd', 400, JSON,
         '{"PROMPT": "hello world", "STREAM": true}',
         '{"error":"STREAM only supported in decoupled mode"}'),
    Case('generate_stream', 'mock_llm_nd', 400, SSE,
         '{"PROMPT": "hello world", "STREAM": true}',
         'data: {"error":"STREAM only supported in decoupled mode"}\n\n'),
    Case('generate', 'mock_llm', 400, JSON,
         '{}',
         '{"error":"[request id: <id_unknown>] expected number of inputs between 2 and 3 but got 0'
         " inputs for model 'mock_llm'. Got input(s) [], but missing required input(s) ['PROMPT','"
         'STREAM\']. Please provide all required input(s)."}'),
    Case('generate', 'mock_llm', 400, JSON,
         '{"abc": 123}',
         '{"error":"[request id: <id_unknown>] expected number of inputs between 2 and 3 but got 0'
         " inputs for model 'mock_llm'. Got input(s) [], but missing required input(s) ['PROMPT','"
         'STREAM\']. Please provide all required input(s)."}'),
    Case('generate_stream', 'mock_llm', 400, JSON,
         '{"PROMPT": "hello"}',
         '{"error":"[request id: <id_unknown>] expected number of inputs between 2 and 3 but got 1'
         " inputs for model 'mock_llm'. Got input(s) ['PROMPT'], but missing required input(s) ['S"
         'TREAM\']. Please provide all required input(s)."}'),
    Case('generate', 'mock_llm', 400, JSON,
         '{"STREAM": false, "other": "param"}',
         '{"error":"[request id: <id_unknown>] expected number of inputs between 2 and 3 but got 1'
         " inputs for model 'mock_llm'. Got input(s) ['STREAM'], but missing required input(s) ['P"
         'ROMPT\']. Please provide all required input(s)."}'),
    Case('generate', 'mock_llm', 500, JSON,
         '{"PROMPT": 123, "STREAM": false}',
         '{"error":"Unable to parse JSON bytes array: attempt to access JSON non-string as string"'
         '}'),
    Case('generate', 'mock_llm', 500, JSON,
         '{"PROMPT": "hello", "STREAM": "false"}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-boolean as boolean"}'),
    Case('generate', 'mock_llm', 500, JSON,
         '{"PROMPT": true, "STREAM": 123}',
         '{"error":"Unable to parse JSON bytes array: attempt to access JSON non-string as string"'
         '}'),
    Case('generate_stream', 'mock_llm', 500, JSON,
         '{"STREAM": 123, "PROMPT": true}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-boolean as boolean"}'),
    Case('generate', 'mock_llm', 400, JSON,
         '{"PROMPT": "hello", "STREAM": false, "PROMPT": "duplicate"}',
         '{"error":"[request id: <id_unknown>] input \'PROMPT\' already exists in request"}'),
    Case('generate_stream', 'mock_llm', 400, JSON,
         '{"PROMPT": "hello", "STREAM": false, "STREAM": true, "PROMPT": "duplicate"}',
         '{"error":"[request id: <id_unknown>] input \'STREAM\' already exists in request"}'),
    Case('generate_stream', 'mock_llm', 400, SSE,
         '{"PROMPT": ["hello world"], "STREAM": true, "REPETITION": 0, "FAIL_LAST": true}',
         'data: {"error":"An Error Occurred"}\n\n'),
    Case('generate_stream', 'mock_llm', 200, SSE,
         '{"PROMPT": ["hello world"], "STREAM": true, "REPETITION": 1, "FAIL_LAST": true}',
         'data: {"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}\n\ndata: {"error"'
         ':"An Error Occurred"}\n\n'),
    Case('generate', 'mock_llm', 400, JSON,
         '{"PROMPT": ["hello world"], "STREAM": true, "REPETITION": 0, "FAIL_LAST": true}',
         '{"error":"An Error Occurred"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": ["hello world"], "STREAM": true, "REPETITION": 1, "FAIL_LAST": true}',
         '{"error":"generate expects model to produce exactly 1 response, use generate stream for '
         'model that generates various number of responses"}'),
    Case('generate_stream', 'mock_llm', 400, SSE,
         '{"PROMPT": ["hello world"], "STREAM": true, "REPETITION": 0, "FAIL_LAST": true, "ERROR_C'
         'ODE": "UNAVAILABLE"}',
         'data: {"error":"An Error Occurred"}\n\n'),
    Case('generate', 'mock_llm', 400, JSON,
         '{"PROMPT": ["hello world"], "STREAM": true, "REPETITION": 0, "FAIL_LAST": true, "ERROR_C'
         'ODE": "UNAVAILABLE"}',
         '{"error":"An Error Occurred"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": "hello world", "STREAM": true}',
         '{"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": "hello world", "STREAM": true, "REPETITION": 0}',
         '{"error":"generate expects model to produce exactly 1 response, use generate stream for '
         'model that generates various number of responses"}'),
    Case('generate_stream', 'mock_llm', 200, SSE,
         '{"PROMPT": "hello world", "STREAM": true, "REPETITION": 0}',
         ''),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": "hello world", "STREAM": true, "REPETITION": 2}',
         '{"error":"generate expects model to produce exactly 1 response, use generate stream for '
         'model that generates various number of responses"}'),
    Case('generate', 'mock_llm', 400, JSON,
         '{"PROMPT": "hello world", "STREAM": true, "PARAMS": {"PARAM_0": 0, "PARAM_1": true}}',
         '{"error":"parameter \'PARAMS\' has invalid type. It should be either \'int\', \'bool\', or \'st'
         'ring\'."}'),
    Case('generate', 'mock_llm', 500, JSON,
         '{"PROMPT": {"USER": "hello world", "BOT": "world hello"}, "STREAM": true}',
         '{"error":"Unable to parse JSON bytes array: attempt to access JSON non-string as string"'
         '}'),
    Case('generate_stream', 'mock_llm', 200, SSE,
         '{"PROMPT": ["hello world"], "STREAM": true, "parameters": {"REPETITION": 2}}',
         'data: {"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}\n\ndata: {"TEXT":'
         '"hello world","model_name":"mock_llm","model_version":"1"}\n\n'),
    Case('generate', 'mock_llm', 500, JSON,
         '{"PROMPT": ["hello world"], "STREAM": true, "parameters": 1}',
         '{"error":"Expected JSON object for keyword: \'parameters\': attempt to access JSON non-obj'
         'ect as object"}'),
    Case('generate', 'mock_llm', 400, JSON,
         '{"PROMPT": ["hello world"], "STREAM": true, "parameters": {"nested": {"twice": 1}}}',
         '{"error":"Converting keyword: \'parameters\': parameter \'nested\' has invalid type. It shou'
         'ld be either \'int\', \'bool\', or \'string\'."}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": ["hello world"], "STREAM": false, "parameters": {"x": 1.5}}',
         '{"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": ["hello world"], "STREAM": false, "x": 1.5}',
         '{"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 400, JSON,
         '{"PROMPT": ["hello world"], "STREAM": false, "x": null}',
         '{"error":"parameter \'x\' has invalid type. It should be either \'int\', \'bool\', or \'string\''
         '."}'),
    Case('generate', 'mock_llm', 400, JSON,
         '{"PROMPT": ["hello world"], "STREAM": false, "x": [1]}',
         '{"error":"parameter \'x\' has invalid type. It should be either \'int\', \'bool\', or \'string\''
         '."}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": ["hello world"], "STREAM": false, "x": -5, "y": 18446744073709551615}',
         '{"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": ["hello world"], "STREAM": false, "triton_x": 1}',
         '{"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": ["hello world"], "STREAM": false, "parameters": {"triton_x": 1}}',
         '{"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": ["hello world"], "STREAM": false, "id": "abc"}',
         '{"TEXT":"hello world","id":"abc","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": ["hello world"], "STREAM": false, "model_name": "abc"}',
         '{"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": ["hello world"], "STREAM": false, "parameters": {"x": 1}, "parameters": {"y":'
         ' 2}}',
         '{"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": ["hello world"], "STREAM": false, "x": 1, "x": 2}',
         '{"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 400, JSON,
         '{"PROMPT": ["a", "b"], "STREAM": false}',
         '{"error":"The schema can not convert input \'PROMPT\' to tensor with proper shape"}'),
    Case('generate', 'mock_llm', 400, JSON,
         '{"PROMPT": [], "STREAM": false}',
         '{"error":"The schema can not convert input \'PROMPT\' to tensor with proper shape"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": [["a"]], "STREAM": false}',
         '{"TEXT":"a","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": "a", "STREAM": [false]}',
         '{"TEXT":"a","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": "a", "STREAM": false, "input_ids": [1,2,3]}',
         '{"TEXT":"a","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": "a", "STREAM": false, "input_ids": []}',
         '{"TEXT":"a","model_name":"mock_llm","model_version":"1"}'),
    Case('generate', 'mock_llm', 500, JSON,
         '{"PROMPT": "a", "STREAM": false, "input_ids": 1.5}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-signed-integer as signed-in'
         'teger"}'),
    Case('generate', 'mock_llm', 500, JSON,
         '{"PROMPT": "a", "STREAM": false, "input_ids": [[1,2],[3]]}',
         '{"error":"Unable to parse \'data\': Shape does not match true shape of \'data\' field"}'),
    Case('generate', 'mock_llm', 500, JSON,
         'not json',
         '{"error":"failed to parse the request JSON buffer: Invalid value. at 1"}'),
    Case('generate', 'mock_llm', 500, JSON,
         '',
         '{"error":"failed to parse the request JSON buffer: The document is empty. at 0"}'),
    Case('generate', 'mock_llm', 500, JSON,
         '[1,2]',
         '{"error":"attempt to get members for non-object"}'),
    Case('generate', 'mock_llm', 500, JSON,
         '"str"',
         '{"error":"attempt to get members for non-object"}'),
    Case('generate', 'mock_llm', 500, JSON,
         '{"PROMPT": "a", "STREAM": false',
         '{"error":"failed to parse the request JSON buffer: Missing a comma or \'}\' after an objec'
         't member. at 31"}'),
    Case('generate_stream', 'mock_llm', 500, JSON,
         'not json',
         '{"error":"failed to parse the request JSON buffer: Invalid value. at 1"}'),
    Case('generate', 'nonexistent', 404, JSON,
         '{"PROMPT": "a"}',
         '{"error":"Request for unknown model: \'nonexistent\' is not found"}'),
    Case('generate_stream', 'nonexistent', 404, JSON,
         '{"PROMPT": "a"}',
         '{"error":"Request for unknown model: \'nonexistent\' is not found"}'),
    Case('versions/1/generate', 'mock_llm', 200, JSON,
         '{"PROMPT": "a", "STREAM": false}',
         '{"TEXT":"a","model_name":"mock_llm","model_version":"1"}'),
    Case('versions/2/generate', 'mock_llm', 404, JSON,
         '{"PROMPT": "a", "STREAM": false}',
         '{"error":"Request for unknown model: \'mock_llm\' version 2 is not found"}'),
    Case('versions/1/generate_stream', 'mock_llm', 200, SSE,
         '{"PROMPT": "a", "STREAM": true}',
         'data: {"TEXT":"a","model_name":"mock_llm","model_version":"1"}\n\n'),
    Case('generate', 'types', 200, JSON,
         '{"F32": [1, 2.5], "I8": [-1, 300]}',
         '{"OUT":"{\\"F32\\": [[2], \\"float32\\", [1.0, 2.5]], \\"I8\\": [[2], \\"int8\\", [-1, 44]], \\"p'
         'arams\\": {}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"F32": 1}',
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [1.0]], \\"params\\": {}}","model_name":"types","mode'
         'l_version":"1"}'),
    Case('generate', 'types', 400, JSON,
         '{"F16": [1.0]}',
         '{"error":"receiving FP16 data via JSON is not supported. Please use the binary data form'
         'at for input F16"}'),
    Case('generate', 'types', 400, JSON,
         '{"BF": [1.0]}',
         '{"error":"receiving BF16 data via JSON is not supported. Please use the binary data form'
         'at for input BF"}'),
    Case('generate', 'types', 500, JSON,
         '{"U64": [-1]}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-unsigned-integer as unsigne'
         'd-integer"}'),
    Case('generate', 'types', 200, JSON,
         '{"U64": [18446744073709551615]}',
         '{"OUT":"{\\"U64\\": [[1], \\"uint64\\", [18446744073709551615]], \\"params\\": {}}","model_nam'
         'e":"types","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"B": [true, false, true, true]}',
         '{"OUT":"{\\"B\\": [[2, 2], \\"bool\\", [[true, false], [true, true]]], \\"params\\": {}}","mod'
         'el_name":"types","model_version":"1"}'),
    Case('generate', 'types', 400, JSON,
         '{"B": [true, false, true]}',
         '{"error":"The schema can not convert input \'B\' to tensor with proper shape"}'),
    Case('generate', 'types', 200, JSON,
         '{"S": ["a", "b", "c", "d"]}',
         '{"OUT":"{\\"S\\": [[2, 2], \\"object\\", [\\"a\\", \\"b\\", \\"c\\", \\"d\\"]], \\"params\\": {}}","mo'
         'del_name":"types","model_version":"1"}'),
    Case('generate', 'types', 400, JSON,
         '{"S": ["a", "b", "c"]}',
         '{"error":"The schema can not convert input \'S\' to tensor with proper shape"}'),
    Case('generate', 'types', 200, JSON,
         '{"FIX": [1,2,3,4,5,6]}',
         '{"OUT":"{\\"FIX\\": [[2, 3], \\"int32\\", [[1, 2, 3], [4, 5, 6]]], \\"params\\": {}}","model_n'
         'ame":"types","model_version":"1"}'),
    Case('generate', 'types', 400, JSON,
         '{"FIX": [1,2,3,4,5]}',
         '{"error":"The schema can not convert input \'FIX\' to tensor with proper shape"}'),
    Case('generate', 'types', 400, JSON,
         '{"FIX": [[1,2,3],[4,5,6]]}',
         '{"error":"The schema can not convert input \'FIX\' to tensor with proper shape"}'),
    Case('generate', 'types', 400, JSON,
         '{"FIX": [[1,2,3],[4,5,6,7]]}',
         '{"error":"The schema can not convert input \'FIX\' to tensor with proper shape"}'),
    Case('generate', 'types', 200, JSON,
         '{"TWO": [1,2,3]}',
         '{"OUT":"{\\"TWO\\": [[1, 3], \\"int32\\", [[1, 2, 3]]], \\"params\\": {}}","model_name":"types'
         '","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"TWO": 5}',
         '{"OUT":"{\\"TWO\\": [[1, 1], \\"int32\\", [[5]]], \\"params\\": {}}","model_name":"types","mod'
         'el_version":"1"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": [1, "a"]}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-number as double"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": [true]}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-number as double"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": [null]}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-number as double"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": null}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-number as double"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": {}}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-number as double"}'),
    Case('generate', 'types', 500, JSON,
         '{"I8": [1.0]}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-signed-integer as signed-in'
         'teger"}'),
    Case('generate', 'types', 500, JSON,
         '{"S": [1, 2]}',
         '{"error":"Unable to parse JSON bytes array: attempt to access JSON non-string as string"'
         '}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": [[1],[2,3]]}',
         '{"error":"Unable to parse \'data\': Shape does not match true shape of \'data\' field"}'),
    Case('generate', 'types', 200, JSON,
         '{"F32": NaN}',
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [NaN]], \\"params\\": {}}","model_name":"types","mode'
         'l_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{}',
         '{"OUT":"{\\"params\\": {}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": [1e400]}',
         '{"error":"failed to parse the request JSON buffer: Number too big to be stored in double'
         '. at 9"}'),
    Case('generate', 'types', 200, JSON,
         '{"x": 1.5, "y": -5, "z": 18446744073709551615, "w": 9223372036854775807, "s": "str", "b"'
         ': true}',
         '{"OUT":"{\\"params\\": {\\"b\\": true, \\"s\\": \\"str\\", \\"w\\": 9223372036854775807, \\"x\\": 1.'
         '5, \\"y\\": -5, \\"z\\": 1.8446744073709552e+19}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"x": 1, "x": 2}',
         '{"OUT":"{\\"params\\": {\\"x\\": 1}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"parameters": {"x": 1}, "parameters": {"y": 2}}',
         '{"OUT":"{\\"params\\": {\\"x\\": 1}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"x": 1, "parameters": {"x": 2}}',
         '{"OUT":"{\\"params\\": {\\"x\\": 2}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"parameters": {"x": 2}, "x": 1}',
         '{"OUT":"{\\"params\\": {\\"x\\": 1}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"model_name": "abc", "id": "r1", "model_version": "3"}',
         '{"OUT":"{\\"params\\": {\\"id\\": \\"r1\\", \\"model_name\\": \\"abc\\", \\"model_version\\": \\"3\\"}'
         '}","id":"r1","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 500, JSON,
         '{"id": 5}',
         '{"error":"Unable to parse \'id\': attempt to access JSON non-string as string"}'),
    Case('generate', 'types', 200, JSON,
         '{"id": ""}',
         '{"OUT":"{\\"params\\": {\\"id\\": \\"\\"}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"triton_x": 1, "parameters": {"triton_y": "a"}}',
         '{"OUT":"{\\"params\\": {\\"triton_x\\": 1, \\"triton_y\\": \\"a\\"}}","model_name":"types","mode'
         'l_version":"1"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": [[], []]}',
         '{"error":"Unable to parse \'data\': Shape does not match true shape of \'data\' field"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": [[1], []]}',
         '{"error":"Unable to parse \'data\': Shape does not match true shape of \'data\' field"}'),
    Case('generate', 'types', 400, JSON,
         '{"S": [["a","b"],["c"]]}',
         '{"error":"[request id: <id_unknown>] unexpected number of string elements 3 for inferenc'
         'e input \'S\' for model \'types\', expecting 2"}'),
    Case('generate', 'types', 500, JSON,
         '{"S": [1,2,3]}',
         '{"error":"Unable to parse JSON bytes array: attempt to access JSON non-string as string"'
         '}'),
    Case('generate', 'types', 400, JSON,
         '{"FIX": ["a"]}',
         '{"error":"The schema can not convert input \'FIX\' to tensor with proper shape"}'),
    Case('generate', 'types', 500, JSON,
         '{"S": {}}',
         '{"error":"Unable to parse JSON bytes array: attempt to access JSON non-string as string"'
         '}'),
    Case('generate', 'types', 200, JSON,
         '{"F32": []}',
         '{"OUT":"{\\"F32\\": [[0], \\"float32\\", []], \\"params\\": {}}","model_name":"types","model_v'
         'ersion":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"S": []}',
         '{"OUT":"{\\"S\\": [[0, 2], \\"object\\", []], \\"params\\": {}}","model_name":"types","model_v'
         'ersion":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"TWO": []}',
         '{"OUT":"{\\"TWO\\": [[1, 0], \\"int32\\", [[]]], \\"params\\": {}}","model_name":"types","mode'
         'l_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"B": []}',
         '{"OUT":"{\\"B\\": [[2, 0], \\"bool\\", [[], []]], \\"params\\": {}}","model_name":"types","mod'
         'el_version":"1"}'),
    Case('generate', 'types', 400, JSON,
         '{"F32": [1,2], "F32": [3]}',
         '{"error":"[request id: <id_unknown>] input \'F32\' already exists in request"}'),
    Case('generate', 'types', 200, JSON,
         '{"parameters": {"F32": [1]}}',
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [1.0]], \\"params\\": {}}","model_name":"types","mode'
         'l_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"parameters": {"F32": 1}}',
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [1.0]], \\"params\\": {}}","model_name":"types","mode'
         'l_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"parameters": {}}',
         '{"OUT":"{\\"params\\": {}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 500, JSON,
         '{"parameters": null}',
         '{"error":"Expected JSON object for keyword: \'parameters\': attempt to access JSON non-obj'
         'ect as object"}'),
    Case('generate', 'types', 400, JSON,
         '{"parameters": {"parameters": {"a": 1}}}',
         '{"error":"Converting keyword: \'parameters\': parameter \'parameters\' has invalid type. It '
         'should be either \'int\', \'bool\', or \'string\'."}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": "1"}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-number as double"}'),
    Case('generate', 'types', 500, JSON,
         '{"I8": [true]}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-signed-integer as signed-in'
         'teger"}'),
    Case('generate', 'types', 500, JSON,
         '{"U64": [1.0]}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-unsigned-integer as unsigne'
         'd-integer"}'),
    Case('generate', 'types', 500, JSON,
         '{"B": [1, 0, 1, 1]}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-boolean as boolean"}'),
    Case('generate', 'types', 200, JSON,
         '{"F32": [1, [2]]}',
         '{"OUT":"{\\"F32\\": [[2], \\"float32\\", [1.0, 2.0]], \\"params\\": {}}","model_name":"types",'
         '"model_version":"1"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": [[1, 2]]}',
         '{"error":"Unable to parse \'data\': Shape does not match true shape of \'data\' field"}'),
    Case('generate', 'types', 200, JSON,
         '{"F32": 1e308}',
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [Infinity]], \\"params\\": {}}","model_name":"types",'
         '"model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"F32": [-0.0, 1e-50]}',
         '{"OUT":"{\\"F32\\": [[2], \\"float32\\", [-0.0, 0.0]], \\"params\\": {}}","model_name":"types"'
         ',"model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"I8": [9223372036854775807]}',
         '{"OUT":"{\\"I8\\": [[1], \\"int8\\", [-1]], \\"params\\": {}}","model_name":"types","model_ver'
         'sion":"1"}'),
    Case('generate', 'types', 500, JSON,
         '{"I8": [18446744073709551615]}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-signed-integer as signed-in'
         'teger"}'),
    Case('generate', 'types', 500, JSON,
         '{"x": 1e400}',
         '{"error":"failed to parse the request JSON buffer: Number too big to be stored in double'
         '. at 6"}'),
    Case('generate', 'types', 200, JSON,
         '{"x": 1.0}',
         '{"OUT":"{\\"params\\": {\\"x\\": 1.0}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"parameters": {"x": 2.5}}',
         '{"OUT":"{\\"params\\": {\\"x\\": 2.5}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 400, JSON,
         '{"e": [], "e2": {}}',
         '{"error":"parameter \'e\' has invalid type. It should be either \'int\', \'bool\', or \'string\''
         '."}'),
    Case('generate', 'types', 200, JSON,
         '{"": 1}',
         '{"OUT":"{\\"params\\": {\\"\\": 1}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"\\u00e9": "\\u00e9"}',
         '{"OUT":"{\\"params\\": {\\"\\\\u00e9\\": \\"\\\\u00e9\\"}}","model_name":"types","model_version":"'
         '1"}'),
    Case('generate', 'types', 400, JSON,
         '{"F16": [[1],[2,3]]}',
         '{"error":"receiving FP16 data via JSON is not supported. Please use the binary data form'
         'at for input F16"}'),
    Case('generate', 'types', 400, JSON,
         '{"F16": "x"}',
         '{"error":"receiving FP16 data via JSON is not supported. Please use the binary data form'
         'at for input F16"}'),
    Case('generate', 'types', 400, JSON,
         '{"S": [["a"],[]]}',
         '{"error":"[request id: <id_unknown>] expected 2 string elements for inference input \'S\' '
         'for model \'types\', got 1"}'),
    Case('generate', 'types', 400, JSON,
         '{"id": "r1", "F32": [1], "F32": [2]}',
         '{"error":"[request id: r1] input \'F32\' already exists in request"}'),
    Case('generate', 'types', 200, JSON,
         '{"S": [["a"],"b"]}',
         '{"OUT":"{\\"S\\": [[1, 2], \\"object\\", [\\"a\\", \\"b\\"]], \\"params\\": {}}","model_name":"typ'
         'es","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"F32": Inf}',
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [Infinity]], \\"params\\": {}}","model_name":"types",'
         '"model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"F32": -Infinity}',
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [-Infinity]], \\"params\\": {}}","model_name":"types"'
         ',"model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"F32": [1], "parameters": {"id": 5}}',
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [1.0]], \\"params\\": {\\"id\\": 5}}","model_name":"typ'
         'es","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"parameters": {"id": "x"}}',
         '{"OUT":"{\\"params\\": {\\"id\\": \\"x\\"}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 500, JSON,
         '{"FIX": [[1,2,3],[4,5,6]], "id": 3}',
         '{"error":"Unable to parse \'id\': attempt to access JSON non-string as string"}'),
    Case('generate', 'types', 500, JSON,
         '{"S": ["a", 1]}',
         '{"error":"Unable to parse JSON bytes array: attempt to access JSON non-string as string"'
         '}'),
    Case('generate', 'types', 400, JSON,
         '{"FIX": [1,2,3,4,5,6,"x"]}',
         '{"error":"The schema can not convert input \'FIX\' to tensor with proper shape"}'),
    Case('generate', 'types', 400, JSON,
         '{"S": ["a","b","c"], "F32": "x"}',
         '{"error":"The schema can not convert input \'S\' to tensor with proper shape"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": 0e400}',
         '{"error":"failed to parse the request JSON buffer: Number too big to be stored in double'
         '. at 8"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": 1E309}',
         '{"error":"failed to parse the request JSON buffer: Number too big to be stored in double'
         '. at 8"}'),
    Case('generate', 'types', 200, JSON,
         '{"x": -9223372036854775809}',
         '{"OUT":"{\\"params\\": {\\"x\\": -9.223372036854776e+18}}","model_name":"types","model_versi'
         'on":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"x": 100000000000000000000000000000000000000}',
         '{"OUT":"{\\"params\\": {\\"x\\": 9.999999999999998e+37}}","model_name":"types","model_versio'
         'n":"1"}'),
    Case('generate', 'types', 500, JSON,
         '{"x": "a\\ud800b"}',
         '{"error":"failed to parse the request JSON buffer: The surrogate pair in string is inval'
         'id. at 8"}'),
    Case('generate', 'types', 200, JSON,
         '{"S": ["\\u0000", "x"]}',
         '{"OUT":"{\\"S\\": [[1, 2], \\"object\\", [\\"\\\\u0000\\", \\"x\\"]], \\"params\\": {}}","model_name'
         '":"types","model_version":"1"}'),
    Case('generate', 'types', 400, JSON,
         '{"F32": [1], "F32": "bad"}',
         '{"error":"[request id: <id_unknown>] input \'F32\' already exists in request"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": "bad", "F32": [1]}',
         '{"error":"Unable to parse \'data\': attempt to access JSON non-number as double"}'),
    Case('generate', 'types', 200, JSON,
         '  {"F32": [1]}  ',
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [1.0]], \\"params\\": {}}","model_name":"types","mode'
         'l_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"F32":[1]}\x00garbage',
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [1.0]], \\"params\\": {}}","model_name":"types","mode'
         'l_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '\ufeff{"F32":[1]}',
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [1.0]], \\"params\\": {}}","model_name":"types","mode'
         'l_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"F32": [0.1, 1.23456789012345678, 3.4028235e38, 1e-46]}',
         '{"OUT":"{\\"F32\\": [[4], \\"float32\\", [0.10000000149011612, 1.2345678806304932, 3.4028234'
         '663852886e+38, 0.0]], \\"params\\": {}}","model_name":"types","model_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"x": 0.1, "y": 1.2345678901234567890123, "z": 123456789012345678901234567890, "w": 1e-3'
         '20, "v": 2.2250738585072014e-308}',
         '{"OUT":"{\\"params\\": {\\"v\\": 2.2250738585072014e-308, \\"w\\": 1e-320, \\"x\\": 0.1, \\"y\\": '
         '1.234567890123457, \\"z\\": 1.2345678901234566e+29}}","model_name":"types","model_version"'
         ':"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"F32": NaN.5}',
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [0.5]], \\"params\\": {}}","model_name":"types","mode'
         'l_version":"1"}'),
    Case('generate', 'types', 200, JSON,
         '{"F32": -NaN}',
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [NaN]], \\"params\\": {}}","model_name":"types","mode'
         'l_version":"1"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": Infinit}',
         '{"error":"failed to parse the request JSON buffer: Invalid value. at 15"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": [1,]}',
         '{"error":"failed to parse the request JSON buffer: Invalid value. at 11"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": [01]}',
         '{"error":"failed to parse the request JSON buffer: Missing a comma or \']\' after an array'
         ' element. at 10"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": -}',
         '{"error":"failed to parse the request JSON buffer: Invalid value. at 9"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": 1.}',
         '{"error":"failed to parse the request JSON buffer: Miss fraction part in number. at 10"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": .5}',
         '{"error":"failed to parse the request JSON buffer: Invalid value. at 8"}'),
    Case('generate', 'types', 500, JSON,
         '{"F32": +1}',
         '{"error":"failed to parse the request JSON buffer: Invalid value. at 8"}'),
    Case('generate', 'types', 500, JSON,
         '{"a": "\\x"}',
         '{"error":"failed to parse the request JSON buffer: Invalid escape character in string. a'
         't 7"}'),
    Case('generate', 'types', 500, JSON,
         '{"a": "\\u12"}',
         '{"error":"failed to parse the request JSON buffer: Incorrect hex digit after \\\\u escape '
         'in string. at 7"}'),
    Case('generate', 'types', 500, JSON,
         '{"a" 1}',
         '{"error":"failed to parse the request JSON buffer: Missing a colon after a name of objec'
         't member. at 5"}'),
    Case('generate', 'types', 500, JSON,
         '{"a":1,}',
         '{"error":"failed to parse the request JSON buffer: Missing a name for object member. at '
         '7"}'),
    Case('generate', 'types', 500, JSON,
         '{"a":tru}',
         '{"error":"failed to parse the request JSON buffer: Invalid value. at 8"}'),
    Case('generate', 'types', 500, JSON,
         '{} x',
         '{"error":"failed to parse the request JSON buffer: The document root must not be followe'
         'd by other values. at 3"}'),
    Case('generate', 'types', 500, JSON,
         '{"a": "x\ty"}',
         '{"error":"failed to parse the request JSON buffer: Invalid escape character in string. a'
         't 8"}'),
    Case('generate', 'types', 500, JSON,
         '{"a": "\\ud800\\u0041"}',
         '{"error":"failed to parse the request JSON buffer: The surrogate pair in string is inval'
         'id. at 7"}'),
    Case('generate', 'types', 200, JSON,
         '{"a": "\\ud800\\udc00"}',
         '{"OUT":"{\\"params\\": {\\"a\\": \\"\\\\ud800\\\\udc00\\"}}","model_name":"types","model_version":'
         '"1"}'),
    Case('generate', 'types', 400, JSON,
         '{"S": [["a","b"]]}',
         '{"error":"The schema can not convert input \'S\' to tensor with proper shape"}'),
    Case('generate', 'types', 400, JSON,
         '{"S": "ab"}',
         '{"error":"The schema can not convert input \'S\' to tensor with proper shape"}'),
    Case('generate', 'types', 200, JSON,
         DEEP_F32,
         '{"OUT":"{\\"F32\\": [[1], \\"float32\\", [1.0]], \\"params\\": {}}","model_name":"types","mode'
         'l_version":"1"}'),
    Case('generate', 'types', 400, JSON,
         DEEP_PARAMETER,
         '{"error":"parameter \'x\' has invalid type. It should be either \'int\', \'bool\', or \'string\''
         '."}'),
    Case('generate', 'mock_llm', 405, JSON,
         '',
         '{"error":"Method Not Allowed"}', method='GET'),
    Case('generate', 'mock_llm', 405, JSON,
         '',
         '{"error":"Method Not Allowed"}', method='PUT'),
    Case('generate', 'mock_llm', 400, JSON,
         '{"PROMPT": "a", "STREAM": false}',
         '{"error":"Unsupported content-encoding, only \'identity\' is supported."}',
         headers=(('Content-Encoding', 'gzip'),)),
    Case('generate', 'mock_llm', 200, JSON,
         '{"PROMPT": "a", "STREAM": false}',
         '{"TEXT":"a","model_name":"mock_llm","model_version":"1"}',
         headers=(('Accept-Encoding', 'gzip'),)),
]
