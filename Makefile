# Thin wrapper over CMake and ctest.
#   make          build (build/bin/tl-*)
#   make demo     set up, build, generate text from the bundled default model (tl-shape | tl-fuse | tl-plan, tl-run)
#   make test     set up, build, run every test (what CI runs)
#   make mutants  the named mutants (tests/mutants/*.patch): each must fail the tests it names
#                 (docs/testing.md; CI runs it after the tests)
BUILD ?= build
JOBS ?= $(shell nproc)
MODEL ?= models/bytellama-past/model.onnx

.PHONY: all setup test mutants demo clean
all:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

setup:
	scripts/setup.sh

test: setup
	$(MAKE) all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

mutants: setup
	scripts/mutants.sh --jobs $(JOBS) --patch tests/mutants/*.patch --require-killed

demo: setup
	$(MAKE) all
	$(BUILD)/bin/tl-shape $(MODEL) | $(BUILD)/bin/tl-fuse - | $(BUILD)/bin/tl-plan - --max-seq 512 --pad 64 -o $(BUILD)/default.planned.onnx
	$(BUILD)/bin/tl-run $(BUILD)/default.planned.onnx --generate --prompt "def " -n 200

clean:
	rm -rf $(BUILD)
