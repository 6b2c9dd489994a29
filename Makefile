# Thin wrapper over CMake and ctest.
#   make          build (build/bin/tl-*)
#   make demo     set up, build, run tl-shape on the bundled default model
#   make test     set up, build, run every test (what CI runs)
BUILD ?= build
JOBS ?= $(shell nproc)
MODEL ?= models/bytellama-past/model.onnx

.PHONY: all setup test demo clean
all:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

setup:
	scripts/setup.sh

test: setup
	$(MAKE) all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: setup
	$(MAKE) all
	$(BUILD)/bin/tl-shape $(MODEL) -o $(BUILD)/bytellama-past.shaped.onnx
	$(BUILD)/bin/tl-shape $(MODEL) --bind batch=1,N=7,past=11 | sed -n '/^symbols:/,$$p'
	@echo "shaped model: $(BUILD)/bytellama-past.shaped.onnx"

clean:
	rm -rf $(BUILD)
