# lit configuration for Parallax's IR and tool tests.
import os

import lit.formats

config.name = "Parallax"
config.test_format = lit.formats.ShTest(execute_external=False)
# .mlir: px IR; .onnxtxt: ONNX models in the ONNX text syntax; .test: other
# tool invocations (example models, error cases).
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.parallax_obj_root, "test")

# The project's tools first, then FileCheck/not/count from LLVM 22.
config.environment["PATH"] = os.pathsep.join(
    [config.parallax_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%models", os.path.join(config.parallax_src_root, "examples", "models")))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Importer", "Inputs")))
config.substitutions.append(("%bench", os.path.join(config.parallax_src_root, "bench")))
config.substitutions.append(("%bin", config.parallax_tools_dir))
