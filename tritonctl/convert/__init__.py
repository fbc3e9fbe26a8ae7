"""Build pipeline: PyTorch -> ONNX, ONNX fix-ups, ONNX -> TensorRT plan, accuracy checks."""
