# qsrank: `make help` lists the targets.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
QSRANK := $(VENV)/bin/qsrank
# Runs are written under RUNS (ignored by git), so that reproducing a result never changes the
# committed ones; `make publish RUN=$(RUNS)/<experiment>/<name>` copies a finished run's tables,
# figures and provenance into results/<experiment>/<name>, which the docs and the README read.
RUNS ?= runs
# VOC2011 actions (Mohapatra et al., CVPR 2018, Section 4.1): one training run feeds Tables 1-4, so the four
# targets share (and resume) one run directory; point VOC_CONFIG at a config with `data:` set
# for the real poselet features.
VOC_CONFIG ?= configs/voc2011_actions.yaml
VOC_RUN ?= $(RUNS)/voc2011_actions/default
VOC_FIGURES ?= $(RUNS)/voc2011_actions
FIGURE_CLASS ?= phoning
# CIFAR-10 (Mohapatra et al., CVPR 2018, Section 4.3): digits-as-CIFAR by default; point CIFAR10_CONFIG at a
# config with `preset: full` and `data:` set for the real batches.
CIFAR10_CONFIG ?= configs/cifar10.yaml
CIFAR10_RUN ?= $(RUNS)/cifar10/default
# VOC2007 detection (Mohapatra et al., CVPR 2018, Section 4.2): synthetic bags of boxes by default; point
# VOC2007_CONFIG at a config with `data:` set for real box features.
VOC2007_CONFIG ?= configs/voc2007_detection.yaml
VOC2007_RUN ?= $(RUNS)/voc2007_detection/default
# VOC2007 scale benchmark: images of the generated features (the paper's trainval: 5011)
SCALE_IMAGES ?= 500
# and a box-feature store (qsrank load cnn) to score from disk beside them (empty: none)
SCALE_STORE ?=
# learning to rank at scale: the size preset of qsrank bench ltr
LTR_PRESET ?= quick
# `qsrank compare`: every way of training for AP/NDCG side by side; resumes in COMPARE_RUN
COMPARE_CONFIG ?= configs/compare.yaml
COMPARE_RUN ?= $(RUNS)/compare/default
COMPARE_STAMP := $(VENV)/.compare-installed
COMPARE_RETRIEVAL_RUN ?= $(RUNS)/compare/retrieval
DIGITS_RUN ?= $(RUNS)/digits/default
# learning to rank with queries: generated MSLR-WEB10K-shaped data and statsmodels' modechoice
LTR_RUN ?= $(RUNS)/ltr/default
# `qsrank fit` on your own data, shown on scikit-learn's breast cancer data written to CSV
FIT_DATA ?= build/breast_cancer.csv
FIT_RUN ?= $(RUNS)/fit/breast_cancer

.PHONY: help install test lint wheel-check docs readme publish bench bench-large bench-share bench-replay bench-torch bench-torch-losses bench-voc2007-scale bench-cold-start bench-ltr clean digits ltr reproduce-voc2011 \
	reproduce-table1 reproduce-table2 reproduce-table3 reproduce-table4 \
	reproduce-figure2 reproduce-figure3 voc2011-train reproduce-cifar10 reproduce-table5 \
	voc2007-large voc2007-xlarge voc2007-paper voc2007-full-images \
	sodeep-eval sodeep-checkpoints compare fit-example compare-retrieval

help:  ## list the targets
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,torch,dask,ltr]' 'torch==2.13.0'  # the CPU build; an unpinned torch pulls CUDA
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install qsrank with its test tools

test: $(STAMP)  ## run the test suite (it also builds the docs strictly and runs their examples)
	$(PY) -m pytest -q

lint: $(STAMP)  ## ruff's lint and format checks and the type check of qs (mypy), as CI runs them
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

wheel-check: $(STAMP)  ## build the sdist and wheel, check them, install the wheel into a fresh venv and run qsrank from it
	.ci/wheel-check $(PY)

docs: $(STAMP)  ## build the docs site into site/ (strict: broken links or missing result files fail)
	$(VENV)/bin/mkdocs build --strict

readme: $(STAMP)  ## rewrite README.md's headline table from the result files under results/
	$(QSRANK) readme

publish: $(STAMP)  ## copy a finished run's tables, figures and provenance into results/ (RUN=$(RUNS)/<experiment>/<name> [TO=results/...])
	@test -n "$(RUN)" || { echo "give the run to publish: make publish RUN=$(RUNS)/<experiment>/<name>"; exit 2; }
	$(QSRANK) publish $(RUN) $(if $(TO),--to $(TO))

bench: $(STAMP)  ## qsrank bench --vary negatives: time the LAI methods as negatives vary (Mohapatra et al., CVPR 2018, Figures 2-3 settings)
	$(QSRANK) bench --vary negatives

bench-large: $(STAMP)  ## qsrank bench --preset large: the scaling curves up to 10^7 negatives
	$(QSRANK) bench --vary negatives --preset large

bench-share: $(STAMP)  ## qsrank bench --vary share: every exact LAI method and the 0-1 LAI on the grid negatives x share of positives, by CPU time (kept in $(RUNS)/scaling/share)
	$(QSRANK) bench --vary share --clock cpu --out $(RUNS)/scaling/share

bench-replay: $(STAMP)  ## qsrank bench --replay: every exact LAI method on the score vectors of VOC2011 action trainings (class phoning)
	$(QSRANK) bench --replay

bench-torch: $(STAMP)  ## qsrank bench torch-lai: LAI in deep-net training, batched vs single calls, share of a PL-CNN step, torch method vs numba
	$(QSRANK) bench torch-lai

bench-torch-losses: $(STAMP)  ## qsrank bench torch-losses: the rank losses of qs.torch against the surrogates (time, memory, distributed, memory bank)
	$(QSRANK) bench torch-losses --out $(RUNS)/torch_losses/default

bench-voc2007-scale: $(STAMP)  ## qsrank bench voc2007-scale: the Dask scoring pass (SCALE_IMAGES=5011: paper's size; SCALE_STORE=PATH: also from a store on disk), pooled-negative LAI
	$(QSRANK) bench voc2007-scale --images $(SCALE_IMAGES) $(if $(SCALE_STORE),--store $(SCALE_STORE))

bench-cold-start: $(STAMP)  ## qsrank bench cold-start: first-call time of every LAI method and loss in fresh processes
	$(QSRANK) bench cold-start

bench-ltr: $(STAMP)  ## qsrank bench ltr: learning to rank at scale (LTR_PRESET=quick, tenth, web30k or web30k-x10): LAI pass vs X @ w, AP-SVM vs LightGBM, out of core
	$(QSRANK) bench ltr --preset $(LTR_PRESET) --out $(RUNS)/ltr_bench/$(LTR_PRESET)

# the training's own report (all four tables) is not shown: each target below prints its table
voc2011-train: $(STAMP)
	$(QSRANK) train --config $(VOC_CONFIG) --out $(VOC_RUN) > /dev/null
	@echo "results: $(VOC_RUN)"

reproduce-table1: voc2011-train  ## Mohapatra et al. (CVPR 2018) Table 1: total LAI time in training, VOC2011 actions (resumes)
	@echo; cat $(VOC_RUN)/table1.md

reproduce-table2: voc2011-train  ## Mohapatra et al. (CVPR 2018) Table 2: time per LAI call, same run as Table 1
	@echo; cat $(VOC_RUN)/table2.md

reproduce-table3: voc2011-train  ## Mohapatra et al. (CVPR 2018) Table 3: test AP per action, 0-1 vs AP loss
	@echo; cat $(VOC_RUN)/table3.md

reproduce-table4: voc2011-train  ## Mohapatra et al. (CVPR 2018) Table 4: NDCG per action, 0-1 vs NDCG loss
	@echo; cat $(VOC_RUN)/table4.md

# $(call figure,LOSS,NAME): the three panels (total, negatives, positives) of one figure
figure = for vary in total negatives positives; do \
	  $(QSRANK) bench --experiment voc2011_actions --config $(VOC_CONFIG) --class $(FIGURE_CLASS) \
	    --loss $(1) --vary $$vary --out $(VOC_FIGURES)/$(2) || exit 1; \
	done; echo "figure: $(VOC_FIGURES)/$(2)/figure.png"

reproduce-figure2: $(STAMP)  ## Mohapatra et al. (CVPR 2018) Figure 2: AP LAI time as total/negatives/positives grow (phoning)
	$(call figure,ap,figure2)

reproduce-figure3: $(STAMP)  ## Mohapatra et al. (CVPR 2018) Figure 3: NDCG LAI time as total/negatives/positives grow (phoning)
	$(call figure,ndcg,figure3)

reproduce-voc2011: reproduce-table1 reproduce-table2 reproduce-table3 reproduce-table4 reproduce-figure2 reproduce-figure3  ## all of Mohapatra et al. (CVPR 2018) Section 4.1

reproduce-table5: $(STAMP)  ## Mohapatra et al. (CVPR 2018) Table 5: VOC2007 detection AP, latent 0-1 vs AP-SVM, and LAI time (resumes)
	$(QSRANK) train --config $(VOC2007_CONFIG) --out $(VOC2007_RUN)
	@echo "figure: $(VOC2007_RUN)/figure.png"

voc2007-large: $(STAMP)  ## Table 5 with 4096 features per box, 20 classes in lockstep out of core (synthetic, generated per pass; resumes)
	$(QSRANK) train --config configs/voc2007_large.yaml --out $(RUNS)/voc2007_detection/large

voc2007-xlarge: $(STAMP)  ## voc2007-large at twice its images and boxes per image (synthetic, generated per pass; resumes)
	$(QSRANK) train --config configs/voc2007_xlarge.yaml --out $(RUNS)/voc2007_detection/xlarge

voc2007-paper: $(STAMP)  ## Table 5 at the paper's size: 5011 + 4952 images x 2000 boxes x 4096 features (synthetic, generated per pass; hours; resumes)
	$(QSRANK) train --config configs/voc2007_paper.yaml --out $(RUNS)/voc2007_detection/paper

voc2007-full-images: $(STAMP)  ## Table 5's Yue vs QS LAI time at VOC2007's full image count, few boxes and features (synthetic; resumes)
	$(QSRANK) train --config configs/voc2007_full_images.yaml --out $(RUNS)/voc2007_detection/full_images

reproduce-cifar10: $(STAMP)  ## Mohapatra et al. (CVPR 2018) Section 4.3: CIFAR-10 mAP/NDCG and training time per LAI (resumes)
	$(QSRANK) train --config $(CIFAR10_CONFIG) --out $(CIFAR10_RUN)
	@echo "figure: $(CIFAR10_RUN)/figure.png"

sodeep-eval: $(STAMP)  ## Engilberge et al. (SoDeep, CVPR 2019) Table 1: L1 rank error of the shipped SoDeep sorters
	$(QSRANK) sodeep eval

sodeep-checkpoints: $(STAMP)  ## retrain the SoDeep sorters shipped in qs/surrogates (about an hour)
	$(QSRANK) sodeep train --kind lstm --length 64 --hidden 64 --steps 2500 --seed 0 \
	  --out qs/surrogates/sorter_lstm_64.pt
	$(QSRANK) sodeep train --kind cnn --length 64 --steps 6000 --seed 0 \
	  --out qs/surrogates/sorter_cnn_64.pt

$(COMPARE_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,torch,compare]' 'torch==2.13.0'
	touch $(COMPARE_STAMP)

compare: $(COMPARE_STAMP)  ## AP/NDCG training methods side by side: tables, figure (resumes)
	$(QSRANK) compare --config $(COMPARE_CONFIG) --out $(COMPARE_RUN)
	@echo "figure: $(COMPARE_RUN)/figure.png"

compare-retrieval: $(COMPARE_STAMP)  ## embedding learning for AP, held-out classes: methods side by side (resumes)
	$(QSRANK) compare --config configs/compare_retrieval.yaml --out $(COMPARE_RETRIEVAL_RUN)
	@echo "figure: $(COMPARE_RETRIEVAL_RUN)/figure.png"

ltr: $(STAMP)  ## learning to rank (configs/ltr.yaml): AP/NDCG-SVMs over queries vs pairwise RankSVM, logistic regression, LightGBM, XGBoost, exact-hinge boosting (resumes)
	$(QSRANK) train --config configs/ltr.yaml --out $(LTR_RUN)

ltr-web10k: $(STAMP)  ## make ltr at MSLR-WEB10K's full shape: 10,000 generated queries (resumes)
	$(QSRANK) train --config configs/ltr.yaml --set synthetic.queries=10000 --out $(RUNS)/ltr/web10k

digits: $(STAMP)  ## the digits experiment (configs/digits.yaml): AP-SVM vs 0-1 SVM vs LinearSVC (resumes)
	$(QSRANK) train --config configs/digits.yaml --out $(DIGITS_RUN)

$(FIT_DATA): | $(STAMP)
	mkdir -p $(dir $@)
	$(PY) -c "from sklearn.datasets import load_breast_cancer as load; d = load(as_frame=True); \
	  d.frame.assign(diagnosis=d.target_names[d.target]).drop(columns='target').to_csv('$@', index=False)"

fit-example: $(FIT_DATA)  ## qsrank fit on scikit-learn's breast cancer data as CSV: RankSVM (AP) vs tuned LinearSVC, LogisticRegression (resumes)
	$(QSRANK) fit $(FIT_DATA) --label-column diagnosis --pos-label malignant --out $(FIT_RUN)

clean:  ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
