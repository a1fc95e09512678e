"""A folder's identity (issue 31 item 3): the repository's remote or an id file, with the path as the fallback.

Real repositories made with the real ``git``: clones, linked worktrees, subfolders,
remotes spelled every way; the identity is read from git's own files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from git_repos import git, repo
from endless.core.store.folder_keys import (ID, PATH, REPO, IdFileError, folder_identity, normalise_remote,
                                            parse_git_config, shown_project, without_credentials)
from endless.core.store.keys import InvalidKey, gateway_key, path_key, workspace_key

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git makes the repositories here")


@pytest.fixture(autouse=True)
def _no_personal_git_config(monkeypatch, tmp_path):
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))


# -- one remote, many spellings ---------------------------------------------------------------


SPELLINGS = ["git@github.com:Ana/Shop.git", "ssh://git@github.com/ana/shop", "ssh://git@github.com:22/ana/shop.git",
             "https://github.com/ana/shop", "https://ana@github.com/ana/shop/", "https://ana:s3cret@github.com/ana/shop.git",
             "git://github.com/ana/shop.git/", "http://GITHUB.COM/ana/shop", "git+ssh://git@github.com/ana/shop.git",
             "github.com:ana/shop.git", "https://github.com:443/ana/shop"]


@pytest.mark.parametrize("url", SPELLINGS)
def test_every_spelling_of_one_remote_is_one_identity(url):
    assert normalise_remote(url) == "github.com/ana/shop"


def test_different_remotes_stay_different():
    seen = {normalise_remote(u) for u in ["git@github.com:ana/shop.git", "git@github.com:ana/shop-2.git",
                                          "git@gitlab.com:ana/shop.git", "git@github.com:bob/shop.git",
                                          "https://gitlab.com/group/sub/shop.git", "https://gitlab.com/group/shop"]}
    assert len(seen) == 6
    assert normalise_remote("https://gitlab.com/group/sub/shop.git") == "gitlab.com/group/sub/shop"


def test_a_local_remote_is_its_real_path_and_nothing_is_no_remote(tmp_path):
    (tmp_path / "bare.git").mkdir()
    assert normalise_remote(str(tmp_path / "bare.git")) == str(tmp_path / "bare")
    assert normalise_remote(f"file://{tmp_path}/bare.git") == str(tmp_path / "bare")
    assert normalise_remote("../bare.git", tmp_path / "clone") == str(tmp_path / "bare")
    assert normalise_remote("") is None and normalise_remote("https://github.com/") is None


def test_a_password_never_reaches_the_identity_or_what_is_shown(tmp_path):
    work = repo(tmp_path / "shop", "https://ana:s3cret-token@github.com/ana/shop.git")
    identity = folder_identity(work)
    assert "s3cret" not in identity.project and "s3cret" not in identity.origin
    assert identity.origin == "remote origin (https://ana:***@github.com/ana/shop.git)"
    assert without_credentials("https://tok@github.com/a") == "https://tok@github.com/a"  # (a user name alone stays)


# -- folders ----------------------------------------------------------------------------------


def test_a_repository_is_keyed_by_its_remote_and_a_subfolder_keeps_a_memory_of_its_own(tmp_path):
    work = repo(tmp_path / "shop", "git@github.com:ana/shop.git")
    (work / "docs" / "api").mkdir(parents=True)
    top, sub = folder_identity(work), folder_identity(work / "docs" / "api")
    assert (top.kind, top.project, top.path) == (REPO, "repo:github.com/ana/shop", str(work))
    assert sub.project == "repo:github.com/ana/shop//docs/api"
    assert shown_project(sub.project).to_json() == {"kind": "repo", "value": "github.com/ana/shop", "folder": "docs/api"}
    assert top.names == (str(work), "repo:github.com/ana/shop")  # the path first: a memory made before


def test_clones_at_other_paths_and_worktrees_share_the_identity(tmp_path):
    first = repo(tmp_path / "laptop" / "shop", "git@github.com:ana/shop.git")
    second = repo(tmp_path / "desktop" / "code" / "Shop", "https://github.com/ana/shop")
    git("worktree", "add", "-q", str(tmp_path / "feature"), cwd=first)
    projects = {folder_identity(p).project for p in (first, second, tmp_path / "feature")}
    assert projects == {"repo:github.com/ana/shop"}
    assert folder_identity(tmp_path / "feature").path == str(tmp_path / "feature")


def test_the_remote_is_origin_else_the_first_by_name(tmp_path):
    work = repo(tmp_path / "a", None)
    git("remote", "add", "zeta", "git@github.com:ana/zeta.git", cwd=work)
    git("remote", "add", "alpha", "git@github.com:ana/alpha.git", cwd=work)
    assert folder_identity(work).project == "repo:github.com/ana/alpha"
    git("remote", "add", "origin", "git@github.com:ana/shop.git", cwd=work)
    assert folder_identity(work).project == "repo:github.com/ana/shop"


def test_without_a_remote_or_outside_a_repository_the_path_is_the_key(tmp_path):
    lone = repo(tmp_path / "lone")
    plain = tmp_path / "plain" / "folder"
    plain.mkdir(parents=True)
    for folder in (lone, plain):
        identity = folder_identity(folder)
        assert (identity.kind, identity.project, identity.names) == (PATH, str(folder), (str(folder),))
        assert workspace_key(None, folder) == path_key(None, folder)


def test_a_link_to_a_folder_has_the_folders_identity(tmp_path):
    work = repo(tmp_path / "shop", "git@github.com:ana/shop.git")
    (tmp_path / "link").symlink_to(work)
    assert folder_identity(tmp_path / "link") == folder_identity(work)


def test_insteadof_is_applied_as_git_applies_it(tmp_path, monkeypatch):
    config = tmp_path / "gitconfig"
    config.write_text('[url "git@github.com:"]\n\tinsteadOf = gh:\n[url "git@github.com:ana/"]\n\tinsteadOf = mine:\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    one, two = repo(tmp_path / "one", "gh:ana/shop"), repo(tmp_path / "two", "mine:shop.git")
    assert folder_identity(one).project == folder_identity(two).project == "repo:github.com/ana/shop"


def test_gits_config_syntax_is_read_as_git_reads_it():
    entries = parse_git_config('[core]\n\tbare = false\n[remote "or\\"igin"] # c\n\turl = "git@x:a/b.git" ; c\n'
                               '[Remote.Other]\n URL=ssh://h/p\n[url "a"]\n\tinsteadOf\n')
    assert ("remote", 'or"igin', "url", "git@x:a/b.git") in entries
    assert ("remote", "other", "url", "ssh://h/p") in entries
    assert ("url", "a", "insteadof", "true") in entries


# -- the id file ------------------------------------------------------------------------------


def test_an_id_file_wins_over_the_remote_and_keeps_it_as_a_weaker_name(tmp_path):
    work = repo(tmp_path / "shop", "git@github.com:ana/shop.git")
    (work / "docs").mkdir()
    (work / ".endless-id").write_text("# the shop's memory\n\nshop-billing\n")
    top, sub = folder_identity(work), folder_identity(work / "docs")
    assert (top.kind, top.project, top.weaker) == (ID, "id:shop-billing", ("repo:github.com/ana/shop",))
    assert top.origin == str(work / ".endless-id")
    assert sub.project == "id:shop-billing//docs" and sub.weaker == ("repo:github.com/ana/shop//docs",)
    assert top.names == (str(work), "id:shop-billing", "repo:github.com/ana/shop")


def test_an_id_file_above_the_repository_is_not_its_own(tmp_path):
    (tmp_path / ".endless-id").write_text("everything\n")
    work = repo(tmp_path / "shop", "git@github.com:ana/shop.git")
    plain = tmp_path / "notes"
    plain.mkdir()
    assert folder_identity(work).project == "repo:github.com/ana/shop"
    assert folder_identity(plain).project == "id:everything//notes"  # a folder outside any repository: found


@pytest.mark.parametrize("text,said", [("", "holds no id"), ("# only a comment\n", "holds no id"),
                                       ("two words\n", "not an id"), ("a//b\n", "not an id"),
                                       ("x" * 129, "not an id"), (b"\xff\xfe", "not UTF-8"),
                                       ("x" * 5000, "longer than")])
def test_an_id_file_that_names_nothing_is_refused_with_what_to_write(tmp_path, text, said):
    folder = tmp_path / "w"
    folder.mkdir()
    path = folder / ".endless-id"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(IdFileError, match=said) as caught:
        folder_identity(folder)
    assert str(path) in str(caught.value)
    with pytest.raises(InvalidKey, match=said):
        workspace_key(None, folder)


def test_gateway_platforms_cannot_take_the_identities_prefixes():
    for platform in ("repo", "id"):
        with pytest.raises(InvalidKey, match="kept for folders"):
            gateway_key(None, platform, "github.com/ana/shop")


def test_a_submodule_is_a_project_of_its_own(tmp_path):
    lib = repo(tmp_path / "lib", "git@github.com:ana/lib.git")
    main = repo(tmp_path / "main", "git@github.com:ana/main.git")
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor/lib", cwd=main)
    assert (main / "vendor" / "lib" / ".git").is_file()  # (a .git file pointing into main's .git/modules)
    assert folder_identity(main / "vendor" / "lib").project == f"repo:{lib}"  # its remote is the clone source
    assert folder_identity(main / "vendor").project == "repo:github.com/ana/main//vendor"
