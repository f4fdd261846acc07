"""The API functions' settings: IAM mode's tenant map from a file (no environment-variable size limit),
and the browser origins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citewise.domain.errors import ValidationError
from citewise.runtime.settings import ApiSettings, load_settings


def test_the_tenant_map_file_is_read_once_when_the_settings_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tenant_map.json"
    path.write_text(json.dumps({"arn:aws:iam::123456789012:role/A": "acme"}), encoding="utf-8")
    monkeypatch.setenv("CITEWISE_TENANT_MAP_FILE", str(path))
    settings = load_settings(ApiSettings)
    path.unlink()  # read at load time: the cold start, not each request
    assert settings.tenant_map == {"arn:aws:iam::123456789012:role/A": "acme"}


@pytest.mark.parametrize(
    ("content", "also_inline", "message"),
    [
        (None, False, "cannot read the tenant map"),
        ("{not json", False, "is not JSON"),
        ('["acme"]', False, "CITEWISE_TENANT_MAP: Input should be a valid dictionary"),
        ('{"arn:aws:iam::123456789012:role/A": "acme"}', True, "not both"),
    ],
)
def test_a_tenant_map_file_that_cannot_be_used_fails_the_cold_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str | None, also_inline: bool, message: str
) -> None:
    path = tmp_path / "tenant_map.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    monkeypatch.setenv("CITEWISE_TENANT_MAP_FILE", str(path))
    if also_inline:
        monkeypatch.setenv("CITEWISE_TENANT_MAP", '{"arn:aws:iam::123456789012:role/B": "beta"}')
    with pytest.raises(ValidationError, match=message):
        load_settings(ApiSettings)


def test_browser_origins_are_origins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEWISE_CORS_ALLOW_ORIGINS", '["https://app.example.com", "http://localhost:3000"]')
    assert load_settings(ApiSettings).cors_allow_origins == ("https://app.example.com", "http://localhost:3000")
    monkeypatch.setenv("CITEWISE_CORS_ALLOW_ORIGINS", '["https://app.example.com/path"]')
    with pytest.raises(ValidationError, match="not an origin"):
        load_settings(ApiSettings)
