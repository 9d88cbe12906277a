# Two commands: `make run` (set up and start the embedded product) and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
export PORT

.PHONY: run dev test install lint bench-ingest bench-context clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall whenever pyproject.toml changes; the stamp records the last install.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed

# The product as it ships: debug off, a secret generated once into var/secret_key,
# static files collected and served by the web process. It listens on 127.0.0.1 over
# plain HTTP, so its cookies cannot be Secure-only; behind TLS, leave those two unset.
run: install
	$(BIN)/python manage.py migrate --noinput -v 0
	$(BIN)/python manage.py collectstatic --noinput -v 0
	$(BIN)/python manage.py demo_setup --port $(PORT)
	SESSION_COOKIE_SECURE=0 CSRF_COOKIE_SECURE=0 $(BIN)/honcho start -f Procfile

# For working on Memdesk: Django's debug pages and the autoreloading runserver.
dev: install
	$(BIN)/python manage.py migrate --noinput -v 0
	$(BIN)/python manage.py demo_setup --port $(PORT)
	DJANGO_DEBUG=1 $(BIN)/honcho start -f Procfile.dev

# Lint, migrations in step with the models, types, system checks, then the suites.
test: install
	$(BIN)/ruff check .
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/mypy core tenancy memory governance dashboard config
	$(BIN)/python manage.py check --fail-level WARNING
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .

bench-ingest: install
	$(BIN)/python bench/ingest.py

bench-context: install
	$(BIN)/python bench/context.py

clean:
	rm -rf $(VENV) var
