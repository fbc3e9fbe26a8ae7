"""The per-request server a user would otherwise build: FastAPI on uvicorn, one
onnxruntime ``session.run`` per request, no batching. It speaks just enough of the KServe v2
HTTP binary protocol for bench_serve.py's load generator.

    python benchmarks/naive_server.py MODEL.onnx PORT
"""

from __future__ import annotations

import json
import sys

import numpy as np
import onnxruntime as ort
import uvicorn
from fastapi import FastAPI, Request, Response

model_path, port = sys.argv[1], int(sys.argv[2])
session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
app = FastAPI()


@app.get("/v2/health/ready")
def ready() -> Response:
    return Response(status_code=200)


@app.post("/v2/models/{model}/infer")
async def infer(model: str, request: Request) -> Response:
    body = await request.body()
    header_length = int(request.headers["inference-header-content-length"])
    header = json.loads(body[:header_length])
    offset = header_length
    feeds = {}
    for item in header["inputs"]:
        size = item["parameters"]["binary_data_size"]
        feeds[item["name"]] = np.frombuffer(body[offset:offset + size], np.float32).reshape(item["shape"])
        offset += size
    outputs = session.run(None, feeds)
    names = [o.name for o in session.get_outputs()]
    raw = [np.ascontiguousarray(o).tobytes() for o in outputs]
    reply = json.dumps({"model_name": model, "model_version": "1", "outputs": [
        {"name": n, "datatype": "FP32", "shape": list(o.shape), "parameters": {"binary_data_size": len(r)}}
        for n, o, r in zip(names, outputs, raw)]}).encode()
    return Response(reply + b"".join(raw), media_type="application/octet-stream",
                    headers={"Inference-Header-Content-Length": str(len(reply))})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
