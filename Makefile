# Thin wrapper over CMake: `make` builds, `make test` sets up, builds and runs ctest,
# `make demo` runs tl-shape on the bundled default model.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all setup test demo clean
all:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

setup:
	scripts/setup.sh

test: setup all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: all
	$(BUILD)/bin/tl-shape ../shared/models/bytellama-past/model.onnx --emit text | tail -n 30

clean:
	rm -rf $(BUILD)
