"""The example --explain shows for each diagnostic code: a small model (config.pbtxt,
files, sibling models, an ONNX graph) that makes tritonctl report that code.
``tests/unit/test_render_codes.py`` runs every one through the validator."""

from __future__ import annotations

from tritonctl.repo_schema.render.code_examples import Example, OnnxModel, Sibling

H = 'backend: "python"\nmax_batch_size: 8\n'
IN = 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
OUT = 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
IO = IN + OUT
ONNX = 'backend: "onnxruntime"\nmax_batch_size: 8\n'
TRT = 'platform: "tensorrt_plan"\nmax_batch_size: 8\n'
PT = 'backend: "pytorch"\nmax_batch_size: 8\n'
PTIO = (
    'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
)
ENS = 'platform: "ensemble"\nmax_batch_size: 8\n'
ADD = Sibling(
    "add",
    H + 'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    'output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
)
SEQ = (
    'sequence_batching {\n  control_input [\n    { name: "START" control [ { kind: CONTROL_SEQUENCE_START '
    "int32_false_true: [ 0, 1 ] } ] }%s\n  ]\n}\n"
)
STATE = (
    'sequence_batching {\n  state [ {\n    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 '
    "dims: [ 4 ]%s\n  } ]\n}\n"
)
AUTO_COMPLETE = (
    "class TritonPythonModel:\n    @staticmethod\n    def auto_complete_config(config):\n        %s\n"
    "        return config\n\n    def execute(self, requests):\n        return []\n"
)
ORT_OK = OnnxModel((("INPUT0", "FLOAT", ("batch", 4)),), (("OUTPUT0", "FLOAT", ("batch", 4)),))
ORT_FIXED = OnnxModel((("INPUT0", "FLOAT", (1, 4)),), (("OUTPUT0", "FLOAT", (1, 4)),))


def step(
    model: str = "add",
    i: str = 'key: "A" value: "INPUT0"',
    o: str = 'key: "SUM" value: "OUTPUT0"',
    extra: str = "",
    version: int = -1,
) -> str:
    return (
        f'    {{ model_name: "{model}" model_version: {version}{extra} input_map {{ {i} }} output_map {{ {o} }} }}'
    )


def ensemble(*steps: str, head: str = IO, top: str = "") -> str:
    return ENS + head + top + "ensemble_scheduling {\n  step [\n" + ",\n".join(steps) + "\n  ]\n}\n"


DECOUPLED = 'backend: "python"\nmax_batch_size: 8\nmodel_transaction_policy { decoupled: true }\n'


EXAMPLES: dict[str, Example] = {
    "TOP02": Example('name: "resnet"\nbackend: "python"\nmax_batch_size: 8\n' + IO, model="resnet50"),
    "TOP03": Example('backend: "python"\nmax_batch_size: -1\n' + IO),
    "TXT01": Example(
        'backend: "python"\nmax_batch_size: 8\ninput [\n  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }\n'
    ),
    "TXT02": Example(
        'backend: "python"\nmax_batch_size: 8\ninputs [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    ),
    "TXT03": Example('backend: "python"\nmax_batch_size: "8"\n' + IO),
    "TXT04": Example(
        'backend: "python"\nmax_batch_size: 8\ninput [ { name: "INPUT0" data_type: FP32 dims: [ 4 ] } ]\n'
    ),
    "TXT05": Example('backend: "python"\nmax_batch_size: 8\ndynamic_batching { }\nsequence_batching { }\n' + IO),
    "TXT06": Example('backend: "python"\nmax_batch_size: 8\nmax_batch_size: 16\n' + IO),
    "TXT07": Example('backend: "python"\nmax_batch_size: 8\nparameters { value { string_value: "on" } }\n' + IO),
    "TXT11": Example('backend: "python"\nmax_batch_size: ${max_batch_size}\n' + IO),
    "TXT51": Example(
        'backend: "python"\nmax_batch_size: 8\nparameters { key: "engine" value { '
        'string_value: "${engine_dir}/rank0.engine" } }\n' + IO
    ),
    "TXT53": Example(
        'backend: "python"\nmax_batch_size: 8\nparameters { key: "engine_dir" value { '
        'string_value: "${engine_dir}" } }\n' + IO
    ),
    "TXT52": Example(
        'backend: "python"\nmax_batch_size: 8\nparameters { key: "mode" value { string_value: "a" } }\n'
        'parameters { key: "mode" value { string_value: "b" } }\n' + IO
    ),
    "IO01": Example(H + "input [ { data_type: TYPE_FP32 dims: [ 4 ] } ]\n" + OUT),
    "IO02": Example(H + 'input [ { name: "INPUT0" dims: [ 4 ] } ]\n' + OUT),
    "IO03": Example(H + 'input [ { name: "INPUT0" data_type: TYPE_FP32 } ]\n' + OUT),
    "IO04": Example(H + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 0, 4 ] } ]\n' + OUT),
    "IO05": Example(
        'backend: "python"\nmax_batch_size: 0\ninput [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } } ]\n'
        + OUT
    ),
    "IO06": Example(
        H + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 0, 4 ] } } ]\n' + OUT
    ),
    "IO07": Example(
        H + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4, 4 ] reshape { shape: [ 8 ] } } ]\n' + OUT
    ),
    "IO08": Example(
        H
        + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] reshape { shape: [ -1, -1 ] } } ]\n'
        + OUT
    ),
    "IO10": Example(
        H + 'input [ { name: "INPUT0" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 224, 224 ] } ]\n' + OUT
    ),
    "IO11": Example(
        H + 'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true } ]\n' + OUT
    ),
    "IO12": Example(
        H
        + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] is_non_linear_format_io: true } ]\n'
        + OUT
    ),
    "IO13": Example(
        'backend: "pytorch"\nmax_batch_size: 8\ninput [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]\noutput [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
        files=("1/model.pt",),
    ),
    "IO16": Example(
        H + IN + 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" } ]\n'
    ),
    "IO18": Example(
        TRT + 'input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ 1 ] } ]\n' + OUT, files=("1/model.plan",)
    ),
    "IO50": Example(H + IN + IN + OUT),
    "IO51": Example(H + IN + OUT + OUT),
    "IO52": Example(H + IN + 'output [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'),
    "IO54": Example(
        'backend: "python"\nmax_batch_size: 0\ninput [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]\n'
        + OUT
    ),
    "BIO01": Example(
        H + IO + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "COUNT" data_type: TYPE_INT32 } ]\n'
    ),
    "BIO03": Example(
        H
        + IO
        + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "COUNT" data_type: TYPE_INT64 source_input: "INPUT0" } ]\n'
    ),
    "BIO04": Example(
        H
        + IO
        + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "COUNT" data_type: TYPE_INT32 source_input: "IMAGE" } ]\n'
    ),
    "BIO05": Example(
        H + IO + 'batch_output [ { target_name: "OUTPUT0" kind: BATCH_SCATTER_WITH_INPUT_SHAPE } ]\n'
    ),
    "BIO06": Example(
        H
        + IO
        + 'batch_output [ { target_name: "SCORES" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT0" } ]\n'
    ),
    "BIO50": Example(
        PT
        + 'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]\n'
        + 'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        + "dynamic_batching { }\n",
        files=("1/model.pt",),
    ),
    "PB52": Example('backend: "vllm"\nmax_batch_size: 0\n' + IO, files=("1/model.json",)),
    "DB01": Example(H + IO + "dynamic_batching { preferred_batch_size: [ 4, 16 ] }\n"),
    "DB02": Example(H + IO + "dynamic_batching { priority_levels: 2 default_priority_level: 3 }\n"),
    "DB03": Example(
        H
        + IO
        + "dynamic_batching {\n  priority_levels: 2\n  default_priority_level: 1\n  priority_queue_policy { key: 5 value { max_queue_size: 10 } }\n}\n"
    ),
    "DB04": Example(
        H + IO + "dynamic_batching { preserve_ordering: true priority_levels: 2 default_priority_level: 1 }\n"
    ),
    "DB05": Example(
        H
        + IO
        + "dynamic_batching {\n  preserve_ordering: true\n  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 1000 }\n}\n"
    ),
    "DB06": Example(
        H
        + IO
        + 'dynamic_batching { }\nparameters { key: "TRITON_BATCH_STRATEGY_PATH" value { string_value: "../../libbatch.so" } }\n'
    ),
    "DB50": Example('backend: "python"\nmax_batch_size: 0\n' + IO + "dynamic_batching { }\n"),
    "DB51": Example(H + IO + "dynamic_batching { preferred_batch_size: [ 4, 4 ] }\n"),
    "DB52": Example(H + IO + "dynamic_batching { default_priority_level: 1 }\n"),
    "SB01": Example(H + IO + "sequence_batching { }\nresponse_cache { enable: true }\n"),
    "SB02": Example(
        H
        + IO
        + "sequence_batching {\n  control_input [ { control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]\n}\n"
    ),
    "SB03": Example(
        H
        + IO
        + SEQ % ',\n    { name: "START" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] }'
    ),
    "SB04": Example(
        H
        + IO
        + SEQ % ',\n    { name: "START2" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }'
    ),
    "SB05": Example(
        H
        + IO
        + 'sequence_batching {\n  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START } ] } ]\n}\n'
    ),
    "SB06": Example(
        H
        + IO
        + 'sequence_batching {\n  control_input [ { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } ] } ]\n}\n'
    ),
    "SB07": Example(H + IO + "sequence_batching { oldest { preferred_batch_size: [ 16 ] } }\n"),
    "SB08": Example(H + IO + "sequence_batching { direct { minimum_slot_utilization: 1.5 } }\n"),
    "SB50": Example(
        H
        + IO
        + 'sequence_batching {\n  control_input [ { name: "INPUT0" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]\n}\n'
    ),
    "IG01": Example(
        'platform: "ensemble"\nmax_batch_size: 8\n'
        + IO
        + 'instance_group [ { count: 1 kind: KIND_CPU } ]\nensemble_scheduling { step [ { model_name: "my_model" model_version: -1 input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "OUTPUT0" } } ] }\n',
        files=("1/",),
    ),
    "IG02": Example(H + IO + "instance_group [ { kind: KIND_MODEL gpus: [ 0 ] } ]\n"),
    "IG03": Example(H + IO + "instance_group [ { count: 2 kind: KIND_CPU gpus: [ 0 ] } ]\n"),
    "IG06": Example(
        ONNX + IO + 'instance_group [ { kind: KIND_CPU profile: [ "0" ] } ]\n', files=("1/model.onnx",)
    ),
    "IG07": Example(TRT + IO + "instance_group [ { kind: KIND_CPU } ]\n", files=("1/model.plan",)),
    "IG10": Example(
        H
        + IO
        + 'instance_group [ { kind: KIND_CPU rate_limiter { resources [ { name: "R" global: true count: 1 }, { name: "R" count: 2 } ] } } ]\n'
    ),
    "IG50": Example(H + IO + "instance_group [ { count: 0 kind: KIND_CPU } ]\n"),
    "IG51": Example(
        H + IO + 'instance_group [ { name: "cpu" kind: KIND_CPU }, { name: "cpu" kind: KIND_CPU } ]\n'
    ),
    "IG52": Example(H + IO + 'instance_group [ { kind: KIND_CPU host_policy: "numa0" } ]\n'),
    "VP03": Example(H + IO, files=("v1/model.py",)),
    "VP50": Example(H + IO, files=("1/model.py", "v2/model.py")),
    "VP04": Example(
        ensemble(step(version=1)),
        files=("1/",),
        siblings=(Sibling("add", ADD.config, ("1/model.py", "2/model.py")),),
    ),
    "VP51": Example(H + IO + "version_policy { specific { versions: [ 1, 2 ] } }\n"),
    "PB01": Example('platform: "onnx"\nmax_batch_size: 8\n' + IO, files=("1/model.onnx",)),
    "PB02": Example(
        'platform: "ensemble"\nbackend: "python"\nmax_batch_size: 8\n'
        + IO
        + 'ensemble_scheduling { step [ { model_name: "other" model_version: -1 input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "OUTPUT0" } } ] }\n',
        files=("1/",),
    ),
    "PB03": Example(
        'platform: "tensorrt_plan"\nbackend: "onnxruntime"\nmax_batch_size: 8\n' + IO, files=("1/model.onnx",)
    ),
    "PB05": Example('platform: "ensemble"\nmax_batch_size: 8\n' + IO, files=("1/",)),
    "PB07": Example('platform: "libtorch"\nmax_batch_size: 8\n' + IO, files=("1/model.pt",)),
    "PB08": Example("max_batch_size: 8\n" + IO, files=("1/weights.bin",)),
    "PB10": Example(ONNX + IO, files=("1/model.pt",)),
    "PB50": Example(
        TRT + IO + 'cc_model_filenames { key: "86" value: "model_sm86.plan" }\n', files=("1/model.plan",)
    ),
    "PB51": Example('backend: "onnxruntme"\nmax_batch_size: 8\n' + IO, files=("1/model.onnx",)),
    "ST01": Example(
        ONNX
        + IO
        + 'sequence_batching {\n  state [ {\n    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 4 ]\n    initial_state [ { name: "a" data_type: TYPE_FP32 dims: [ 4 ] zero_data: true }, { name: "b" data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } ]\n  } ]\n}\n',
        files=("1/model.onnx",),
    ),
    "ST02": Example(
        ONNX
        + IO
        + 'sequence_batching {\n  state [ {\n    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 4 ]\n    initial_state [ { name: "zeros" data_type: TYPE_INT32 dims: [ 4 ] zero_data: true } ]\n  } ]\n}\n',
        files=("1/model.onnx",),
    ),
    "ST03": Example(
        ONNX
        + IO
        + 'sequence_batching {\n  state [ {\n    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 4 ]\n    initial_state [ { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } ]\n  } ]\n}\n',
        files=("1/model.onnx",),
    ),
    "ST05": Example(
        ONNX
        + IO
        + 'sequence_batching {\n  state [ {\n    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 4 ]\n    initial_state [ { name: "zeros" data_type: TYPE_FP32 dims: [ 8 ] zero_data: true } ]\n  } ]\n}\n',
        files=("1/model.onnx",),
    ),
    "ST06": Example(
        ONNX
        + IO
        + 'sequence_batching {\n  state [ {\n    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 4 ]\n    initial_state [ { name: "zeros" data_type: TYPE_FP32 dims: [ 4 ] } ]\n  } ]\n}\n',
        files=("1/model.onnx",),
    ),
    "REPO52": Example(H + IO, files=("1/model.py", "config_gpu.pbtxt")),
    "REPO53": Example(None, files=("1/model.py", "config.pbtx")),
    "ENS03": Example(
        'platform: "ensemble"\nmax_batch_size: 8\n' + IO + "ensemble_scheduling { }\n", files=("1/",)
    ),
    "ENS10": Example(
        'platform: "ensemble"\nmax_batch_size: 8\n'
        + IO
        + 'ensemble_scheduling { step [ { model_name: "resnet" model_version: -1 input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "OUTPUT0" } } ] }\n',
        files=("1/",),
    ),
    "ENS01": Example(
        'platform: "ensemble"\nmax_batch_size: 8\n'
        + IO
        + 'optimization { input_pinned_memory { enable: false } }\nensemble_scheduling { step [ { model_name: "missing" model_version: -1 input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "OUTPUT0" } } ] }\n',
        files=("1/",),
    ),
    "IO09": Example(
        H
        + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4294967296, 4294967296 ] reshape { shape: [ -1 ] } } ]\n'
        + OUT
    ),
    "IO53": Example(
        ONNX + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 3, 224, 224 ] } ]\n' + OUT,
        files=("1/",),
        onnx=OnnxModel((("INPUT0", "FLOAT", ("batch", "n", 3, 224, 224)),), (("OUTPUT0", "FLOAT", ("batch", 4)),)),
    ),
    "IO14": Example(
        ONNX + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]\n' + OUT,
        files=("1/",),
        onnx=ORT_OK,
    ),
    "IO15": Example(
        TRT
        + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] allow_ragged_batch: true is_non_linear_format_io: true } ]\n'
        + OUT,
        files=("1/model.plan",),
    ),
    "IO17": Example(
        H
        + IN
        + 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "a.txt" }, { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "b.txt" } ]\n',
        files=("1/model.py", "a.txt", "b.txt"),
    ),
    "BIO07": Example(
        TRT
        + 'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true } ]\noutput [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true } ]\nbatch_output [ { target_name: "OUTPUT0" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT0" } ]\n',
        files=("1/model.plan",),
    ),
    "ENS02": Example(
        ensemble(
            step(),
            top='model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n',
        ),
        files=("1/",),
        siblings=(ADD,),
    ),
    "ENS04": Example(
        ENS
        + IO
        + 'ensemble_scheduling {\n  step [ { model_name: "add" model_version: -1 input_map { key: "A" value: "INPUT0" } } ]\n}\n',
        files=("1/",),
        siblings=(ADD,),
    ),
    "ENS05": Example(ensemble(step(), step()), files=("1/",), siblings=(ADD,)),
    "ENS07": Example(
        ensemble(
            step(),
            head='input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "EXTRA" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
            + OUT,
        ),
        files=("1/",),
        siblings=(ADD,),
    ),
    "ENS08": Example(
        ensemble(
            step(o='key: "SUM" value: "tmp"'),
            step(i='key: "A" value: "tmp"', o='key: "SUM" value: "OUTPUT1"'),
            head=IN
            + 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
        ),
        files=("1/",),
        siblings=(ADD,),
    ),
    "ENS09": Example(ensemble(step(), step(o='key: "SUM" value: "unused"')), files=("1/",), siblings=(ADD,)),
    "ENS11": Example(
        ensemble(step(model="my_model", i='key: "INPUT0" value: "INPUT0"', o='key: "OUTPUT0" value: "OUTPUT0"')),
        files=("1/",),
    ),
    "ENS12": Example(
        ensemble(step()),
        files=("1/",),
        siblings=(Sibling("add", ADD.config.replace("max_batch_size: 8", "max_batch_size: -1")),),
    ),
    "ENS13": Example(
        ensemble(step(), head=IO).replace("max_batch_size: 8", "max_batch_size: 32", 1),
        files=("1/",),
        siblings=(ADD,),
    ),
    "ENS14": Example(ensemble(step(i='key: "B" value: "INPUT0"')), files=("1/",), siblings=(ADD,)),
    "ENS15": Example(
        ensemble(step()),
        files=("1/",),
        siblings=(
            Sibling(
                "add",
                H + 'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "B" data_type: TYPE_FP32 '
                'dims: [ 4 ] } ]\noutput [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
            ),
        ),
    ),
    "ENS16": Example(ensemble(step(o='key: "TOTAL" value: "OUTPUT0"')), files=("1/",), siblings=(ADD,)),
    "ENS17": Example(
        ensemble(step(), head='input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] } ]\n' + OUT),
        files=("1/",),
        siblings=(ADD,),
    ),
    "ENS18": Example(
        ensemble(step(), head='input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 8 ] } ]\n' + OUT),
        files=("1/",),
        siblings=(ADD,),
    ),
    "ENS50": Example(ensemble(step(extra=' model_namespace: "ns"')), files=("1/",), siblings=(ADD,)),
    "IG08": Example(
        TRT
        + IO
        + "instance_group [ { kind: KIND_GPU gpus: [ 0 ] secondary_devices [ { kind: KIND_NVDLA device_id: 0 }, { kind: KIND_NVDLA device_id: 1 } ] } ]\n",
        files=("1/model.plan",),
    ),
    "IG53": Example(
        ONNX
        + IO
        + 'instance_group [ { kind: KIND_CPU } ]\noptimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" } ] } }\n',
        files=("1/",),
        onnx=ORT_OK,
    ),
    "IG11": Example(
        'platform: "tensorflow_savedmodel"\nmax_batch_size: 8\n'
        + IO
        + 'instance_group [ { kind: KIND_CPU } ]\noptimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" } ] } }\n',
        files=("1/model.savedmodel/",),
    ),
    "PB04": Example('backend: "tensorflow"\nmax_batch_size: 8\n' + IO, files=("1/",)),
    "PB06": Example('backend: "python"\nruntime: "../../evil.so"\nmax_batch_size: 8\n' + IO),
    "PB09": Example('default_model_filename: "net.bin"\nmax_batch_size: 8\n' + IO, files=("1/net.bin",)),
    "ST04": Example(
        ONNX
        + IO
        + 'sequence_batching {\n  state [\n    { input_name: "S" output_name: "S_OUT" data_type: TYPE_FP32 dims: [ 4 ] initial_state [ { name: "a" data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } ] },\n    { input_name: "S" output_name: "S_OUT2" data_type: TYPE_FP32 dims: [ 4 ] initial_state [ { name: "b" data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } ] }\n  ]\n}\n',
        files=("1/model.onnx",),
    ),
    "ST07": Example(ONNX + IO + STATE % " use_growable_memory: true", files=("1/model.onnx",)),
    "ST50": Example(ONNX + IO + STATE % "", files=("1/model.onnx",)),
    "REPO50": Example(H + IO, siblings=(Sibling(".ipynb_checkpoints", None, ()),)),
    "WU03": Example(
        H
        + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        + OUT
        + 'model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ -1 ] zero_data: true } } } ]\n'
    ),
    "WU04": Example(
        H
        + IO
        + 'model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] } } } ]\n'
    ),
    "WU05": Example(
        H
        + IO
        + 'model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "input0.bin" } } } ]\n'
    ),
    "WU06": Example(
        H
        + IO
        + 'model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_INT32 dims: [ 4 ] zero_data: true } } } ]\n'
    ),
    "WU07": Example(
        H
        + IO
        + 'sequence_batching { }\nmodel_warmup [ { name: "w" batch_size: 1 count: 3 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n'
    ),
    "WU50": Example(
        H
        + IO
        + 'model_warmup [ { name: "w" inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n'
    ),
    "MET01": Example(
        H
        + IO
        + 'model_metrics { metric_control [ { metric_identifier { family: "nv_inference_first_response_histogram_ms" } } ] }\n'
    ),
    "MET50": Example(
        H
        + IO
        + 'model_metrics { metric_control [ { metric_identifier { family: "nv_inference_count" } histogram_options { buckets: [ 1, 10 ] } } ] }\n'
    ),
    "MET51": Example(
        H
        + IO
        + 'model_metrics { metric_control [ { metric_identifier { family: "nv_inference_first_response_histogram_ms" } histogram_options { buckets: [ 100, 10, 1 ] } } ] }\n'
    ),
    "AGT01": Example(H + IO + 'model_repository_agents { agents [ { parameters { key: "k" value: "v" } } ] }\n'),
    "AGT50": Example(H + IO + 'model_repository_agents { agents [ { name: "decryptor" } ] }\n'),
    "OPT02": Example(
        ONNX
        + IO
        + 'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt_fp16" } ] } }\n',
        files=("1/",),
        onnx=ORT_OK,
    ),
    "OPT04": Example(
        TRT + IO + "optimization { cuda { graphs: true graph_spec [ { batch_size: 16 } ] } }\n",
        files=("1/model.plan",),
    ),
    "OPT50": Example(H + IO + "optimization { priority: PRIORITY_MAX }\n"),
    "OPT51": Example(H + IO + "optimization { graph { level: 1 } }\n"),
    "OPT52": Example(ONNX + IO + "optimization { graph { level: 3 } }\n", files=("1/",), onnx=ORT_OK),
    "OPT53": Example(H + IO + 'model_operations { op_library_filename: "libcustom.so" }\n'),
    "PAR01": Example(
        H
        + IO
        + 'parameters { key: "EXECUTION_ENV_PATH" value { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }\n'
    ),
    "PAR02": Example(
        ONNX + IO + 'parameters { key: "execution_mode" value { string_value: "2" } }\n',
        files=("1/",),
        onnx=ORT_OK,
    ),
    "PAR50": Example(
        ONNX + IO + 'parameters { key: "intra_op_threads" value { string_value: "4" } }\n',
        files=("1/",),
        onnx=ORT_OK,
    ),
    "RC01": Example(H + IO + "model_transaction_policy { decoupled: true }\nresponse_cache { enable: true }\n"),
    "RC50": Example(H + IO + "response_cache { enable: true }\n"),
    "RC51": Example(H + IO + "model_transaction_policy { decoupled: true }\n"),
    "ORT01": Example(
        ONNX
        + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        + OUT,
        files=("1/",),
        onnx=ORT_OK,
    ),
    "ORT02": Example(
        ONNX + 'input [ { name: "input" data_type: TYPE_FP32 dims: [ 4 ] } ]\n' + OUT, files=("1/",), onnx=ORT_OK
    ),
    "ORT03": Example(
        ONNX + 'input [ { name: "INPUT0" data_type: TYPE_FP16 dims: [ 4 ] } ]\n' + OUT, files=("1/",), onnx=ORT_OK
    ),
    "ORT04": Example(ONNX + IO, files=("1/",), onnx=ORT_FIXED),
    "ORT05": Example(
        ONNX + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 8 ] } ]\n' + OUT, files=("1/",), onnx=ORT_OK
    ),
    "AC01": Example('backend: "onnxruntime"\nmax_batch_size: 8\n', files=("1/",), onnx=ORT_FIXED),
    "MF01": Example(ONNX + IO, files=("1/model.onnx",)),
    "PT01": Example(
        PT + 'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n', files=("1/model.pt",)
    ),
    "PT02": Example(
        PT
        + PTIO
        + 'sequence_batching {\n  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]\n}\n',
        files=("1/model.pt",),
    ),
    "PT04": Example(
        PT
        + 'input [ { name: "TEXT__0" data_type: TYPE_STRING dims: [ 2 ] } ]\n'
        + 'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
        files=("1/model.pt",),
    ),
    "PT50": Example(
        PT
        + 'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "mask" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
        files=("1/model.pt",),
    ),
    "PY50": Example(
        H + IO,
        files=(("1/model.py", "class TritonPythonModel:\n    def initialize(self, args):\n        pass\n"),),
    ),
    "PY01": Example(H + IO, files=(("1/model.py", "def broken(:\n"),)),
    "AC04": Example(
        H + 'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] } ]\n' + OUT,
        files=(("1/model.py", AUTO_COMPLETE % 'config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", '
                '"dims": [4]})'),),
    ),
    "AC52": Example(
        H + 'input [ { name: "INPUT0" data_type: TYPE_FP32 } ]\n' + OUT,
        files=(("1/model.py", "import tensorrt_llm_runtime_helpers\n\n" + AUTO_COMPLETE % "pass"),),
    ),
    "AC53": Example('backend: "dali"\nmax_batch_size: 8\n', files=(("1/dali.py", "# @autoserialize pipeline\n"),)),
    "ENS19": Example(
        ensemble(
            step(model="gen_a", i='key: "A" value: "INPUT0"', o='key: "OUT" value: "a"'),
            step(model="gen_b", i='key: "A" value: "INPUT0"', o='key: "OUT" value: "b"'),
            step(
                model="join",
                i='key: "X" value: "a" } input_map { key: "Y" value: "b"',
                o='key: "Z" value: "OUTPUT0"',
            ),
        ),
        files=("1/",),
        siblings=(
            Sibling(
                "gen_a",
                DECOUPLED
                + 'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
            ),
            Sibling(
                "gen_b",
                DECOUPLED
                + 'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
            ),
            Sibling(
                "join",
                H
                + 'input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "Z" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
            ),
        ),
    ),
    "OPT03": Example(
        'platform: "tensorflow_savedmodel"\nmax_batch_size: 8\n'
        + IO
        + 'instance_group [ { kind: KIND_GPU } ]\noptimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" }, { name: "auto_mixed_precision" } ] } }\n',
        files=("1/model.savedmodel/",),
    ),
    "ST51": Example(H + IO + STATE % ""),
}
