"""posture's customer console in a real browser (headless Chromium through Selenium) against
a real OpenID Connect provider (node-oidc-provider, idp.mjs). Run by `cargo xtask
console-e2e`, which starts PostgreSQL, the provider and posture-api and sets:

  POSTURE_URL       the served posture-api, e.g. http://127.0.0.1:41234
  CUSTOMER_ID       the customer whose console the provider signs in to
  PROVIDER_NAME     what its sign-in button calls the provider (sso set --display-name)
  SECOND_CUSTOMER_ID, SECOND_PROVIDER_NAME
                    a second customer, whose console signs in with a provider of another
                    make (PyPI oidc-provider-mock: a form with one button per user)
  THIRD_CUSTOMER_ID, THIRD_CUSTOMER_NAME
                    a third customer signing in with the first provider, whose console the
                    suite provisions over SCIM and then requires provisioning for
  POSTURE_API, DATABASE_URL, POSTURE_SECRET_KEY
                    the operator's CLI, to require provisioning as an operator does
  SCREENSHOTS       where each page's screenshot goes
  ISSUED_KEYS_FILE  where the keys and client secrets shown by the console are written
                    (xtask then checks that no log line of posture-api holds any of them)
  CLIENT_PUBLIC_KEY_FILE
                    a P-256 public key (PEM) the suite uploads for an OAuth client
"""

import base64
import json
import os
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

BASE = os.environ["POSTURE_URL"]
CUSTOMER = os.environ["CUSTOMER_ID"]
SHOTS = os.environ["SCREENSHOTS"]
ISSUED = os.environ["ISSUED_KEYS_FILE"]
CONSOLE = f"{BASE}/console/{CUSTOMER}/"
PROVIDER_NAME = os.environ["PROVIDER_NAME"]
SECOND_CONSOLE = f"{BASE}/console/{os.environ['SECOND_CUSTOMER_ID']}/"
SECOND_PROVIDER_NAME = os.environ["SECOND_PROVIDER_NAME"]
THIRD_CUSTOMER = os.environ["THIRD_CUSTOMER_ID"]
THIRD_CONSOLE = f"{BASE}/console/{THIRD_CUSTOMER}/"


def new_browser():
    options = Options()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--disable-gpu", "--window-size=1280,860"):
        options.add_argument(arg)
    service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    return driver


@pytest.fixture
def browser():
    driver = new_browser()
    yield driver
    driver.quit()


@pytest.fixture
def second_browser():
    """Another browser: another admin's laptop."""
    driver = new_browser()
    yield driver
    driver.quit()


def shot(driver, name):
    driver.save_screenshot(os.path.join(SHOTS, f"{name}.png"))


def wait(driver):
    return WebDriverWait(driver, 20)


def detached(element):
    """A wait condition: `element` no longer belongs to the shown document. Chromium reports
    that either as a stale element or, mid-navigation, as "Node with given id does not
    belong to the document" (a plain WebDriverException), which EC.staleness_of lets out."""
    def check(_driver):
        try:
            element.is_enabled()
            return False
        except WebDriverException:
            return True
    return check


def click_and_load(driver, element):
    """Clicks `element` and waits until the page it leads to has loaded."""
    old = driver.find_element(By.TAG_NAME, "html")
    element.click()
    wait(driver).until(detached(old))
    wait(driver).until(lambda d: d.execute_script("return document.readyState") == "complete")


def on_posture(driver):
    return driver.current_url.startswith(f"{BASE}/")


def sign_in(driver, user, screenshot=None, again=False, console=CONSOLE):
    """Signs `user` in from the console's sign-in page through the provider's own pages
    (`again`: while signed in, straight to the sign-in link, as the page sends an admin on)."""
    if again:
        driver.get(f"{console}sign-in")
    else:
        driver.get(console)
        if screenshot:
            shot(driver, screenshot)
        click_and_load(driver, driver.find_element(By.ID, "sign-in"))
    if driver.find_elements(By.NAME, "login"):
        driver.find_element(By.NAME, "login").send_keys(user)
        driver.find_element(By.NAME, "password").send_keys("any password")
        click_and_load(driver, driver.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    # The provider asks for consent once per user and client.
    if not on_posture(driver):
        click_and_load(driver, driver.find_element(By.CSS_SELECTOR, "button.login-submit"))
    wait(driver).until(on_posture)


def api_status(key, path="/api/v1/findings"):
    request = urllib.request.Request(f"{BASE}{path}", headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def http_status(driver):
    """The HTTP status of the page the browser shows (Navigation Timing Level 2)."""
    return driver.execute_script(
        "return performance.getEntriesByType('navigation')[0].responseStatus")


def session_cookie(driver):
    return next(c for c in driver.get_cookies() if c["name"] == "posture_session")


def issue_key(driver, name, scope, expires, console=CONSOLE):
    driver.get(f"{console}keys")
    driver.find_element(By.ID, "name").send_keys(name)
    driver.find_element(By.CSS_SELECTOR, f"input[name=scope][value='{scope}']").click()
    Select(driver.find_element(By.ID, "expires")).select_by_value(expires)
    click_and_load(driver, driver.find_element(By.ID, "issue-key"))
    key = wait(driver).until(EC.presence_of_element_located((By.ID, "new-key"))).text.strip()
    with open(ISSUED, "a", encoding="utf-8") as issued:
        issued.write(key + "\n")
    return key


def test_an_admin_issues_a_key_uses_it_and_revokes_it(browser):
    browser.get(CONSOLE)
    assert browser.find_element(By.ID, "sign-in").text == f"Sign in with {PROVIDER_NAME}"
    sign_in(browser, "alice", screenshot="01-sign-in")
    assert browser.current_url == f"{CONSOLE}keys"
    assert "Contoso Group" in browser.page_source and "Alice Admin" in browser.page_source
    shot(browser, "02-keys-before")

    cookie = session_cookie(browser)
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Lax"
    assert cookie["path"] == f"/console/{CUSTOMER}/"
    assert cookie["secure"] is False  # plain HTTP here; Secure over HTTPS (Rust tests)

    key = issue_key(browser, "SIEM connector", "read:findings", "30d")
    assert http_status(browser) == 200
    assert key.startswith("svc_") and len(key) == 43
    assert "will not be shown again" in browser.page_source
    copy = browser.find_element(By.CSS_SELECTOR, "button[data-copy=new-key]")
    assert copy.is_displayed(), "the script shows the copy button"
    shot(browser, "03-key-shown-once")

    status, body = api_status(key)
    assert status == 200 and body["meta"]["total"] > 0
    status, body = api_status(key, "/api/v1/identities")
    assert status == 403 and "read:identities" in body["reason"]

    later_pages = []
    click_and_load(browser, browser.find_element(By.ID, "done"))
    later_pages.append(browser.page_source)
    row = browser.find_element(By.XPATH, "//tr[td[1][text()='SIEM connector']]")
    assert "read:findings" in row.text and "Alice Admin" in row.text and "Active" in row.text
    shot(browser, "04-keys")

    click_and_load(browser, row.find_element(By.LINK_TEXT, "Revoke…"))
    later_pages.append(browser.page_source)
    assert "cannot be undone" in browser.page_source
    shot(browser, "05-revoke-confirm")
    click_and_load(browser, browser.find_element(By.ID, "confirm-revoke"))
    later_pages.append(browser.page_source)
    assert "was revoked" in browser.page_source
    shot(browser, "06-revoked")

    status, body = api_status(key)
    assert status == 401 and body["error"] == "unauthorized"

    browser.get(f"{CONSOLE}audit")
    later_pages.append(browser.page_source)
    audit = browser.find_element(By.CSS_SELECTOR, "table.audit").text
    assert "Alice Admin" in audit and "alice" in audit
    assert "Issued" in audit and "Revoked" in audit and "SIEM connector" in audit
    shot(browser, "07-audit")
    for page in later_pages:
        assert key not in page, "the key appeared again after the page that issued it"


def token_status(client_id, secret):
    """The status of a token request with this client's secret, and its token if any."""
    basic = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    request = urllib.request.Request(
        f"{BASE}/oauth/token",
        data=b"grant_type=client_credentials",
        headers={
            "Authorization": f"Basic {basic}",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)["access_token"]
    except urllib.error.HTTPError as error:
        return error.code, None


def shown_secret(driver):
    secret = wait(driver).until(EC.presence_of_element_located((By.ID, "new-secret"))).text.strip()
    with open(ISSUED, "a", encoding="utf-8") as issued:
        issued.write(secret + "\n")
    return secret


def test_an_admin_issues_an_oauth_client_rotates_it_and_revokes_it(browser):
    sign_in(browser, "alice")
    browser.get(f"{CONSOLE}clients")
    shot(browser, "20-clients-before")
    browser.find_element(By.ID, "name").send_keys("SOAR playbooks")
    browser.find_element(By.CSS_SELECTOR, "input[name=scope][value='read:findings']").click()
    click_and_load(browser, browser.find_element(By.ID, "issue-client"))
    assert http_status(browser) == 200
    client_id = browser.find_element(By.ID, "client-id").text.strip()
    secret = shown_secret(browser)
    assert client_id.startswith("pci_") and secret.startswith("pcs_")
    assert browser.find_element(By.CSS_SELECTOR, "button[data-copy=new-secret]").is_displayed()
    shot(browser, "21-client-secret-shown-once")
    status, token = token_status(client_id, secret)
    assert status == 200 and token.startswith("pat_")
    status, body = api_status(token)
    assert status == 200 and body["meta"]["total"] > 0

    click_and_load(browser, browser.find_element(By.ID, "done"))
    row = browser.find_element(By.XPATH, "//tr[td[1][text()='SOAR playbooks']]")
    assert client_id in row.text and "Active" in row.text and secret not in browser.page_source
    shot(browser, "22-clients")
    click_and_load(browser, row.find_element(By.LINK_TEXT, "Rotate…"))
    Select(browser.find_element(By.ID, "overlap")).select_by_value("now")
    shot(browser, "23-rotate")
    click_and_load(browser, browser.find_element(By.ID, "confirm-rotate"))
    new_secret = shown_secret(browser)
    assert new_secret != secret
    assert token_status(client_id, secret)[0] == 401, "rotated away at once"
    assert token_status(client_id, new_secret)[0] == 200

    click_and_load(browser, browser.find_element(By.ID, "done"))
    row = browser.find_element(By.XPATH, "//tr[td[1][text()='SOAR playbooks']]")
    click_and_load(browser, row.find_element(By.LINK_TEXT, "Revoke…"))
    assert "cannot be undone" in browser.page_source
    click_and_load(browser, browser.find_element(By.ID, "confirm-revoke"))
    assert "was revoked" in browser.page_source
    shot(browser, "24-client-revoked")
    assert api_status(token)[0] == 401, "the client's token ends with it"
    assert token_status(client_id, new_secret)[0] == 401


def test_an_admin_uploads_a_public_key_for_a_client(browser):
    sign_in(browser, "alice")
    browser.get(f"{CONSOLE}clients")
    browser.find_element(By.ID, "name").send_keys("signed client")
    browser.find_element(By.CSS_SELECTOR, "input[name=scope][value='read:identities']").click()
    with open(os.environ["CLIENT_PUBLIC_KEY_FILE"], encoding="utf-8") as pem:
        browser.find_element(By.ID, "public-key").send_keys(pem.read())
    click_and_load(browser, browser.find_element(By.ID, "issue-client"))
    assert http_status(browser) == 200
    assert "private_key_jwt" in browser.page_source
    assert not browser.find_elements(By.ID, "new-secret")
    shot(browser, "25-key-client")
    # A key that is no key: said in words, on the form.
    browser.get(f"{CONSOLE}clients")
    browser.find_element(By.ID, "name").send_keys("broken key")
    browser.find_element(By.CSS_SELECTOR, "input[name=scope][value='read:identities']").click()
    browser.find_element(By.ID, "public-key").send_keys("not a key")
    click_and_load(browser, browser.find_element(By.ID, "issue-client"))
    assert http_status(browser) == 422
    assert "cannot be used" in browser.find_element(By.ID, "form-error").text


def test_a_form_posted_without_its_csrf_token_is_refused(browser):
    sign_in(browser, "alice")
    browser.get(f"{CONSOLE}keys")
    keys_before = len(browser.find_elements(By.CSS_SELECTOR, "tr[data-key-id]"))
    browser.find_element(By.ID, "name").send_keys("forged")
    browser.find_element(By.CSS_SELECTOR, "input[name=scope][value='read:roles']").click()
    browser.execute_script("document.querySelector('#issue input[name=csrf]').remove()")
    click_and_load(browser, browser.find_element(By.ID, "issue-key"))
    assert http_status(browser) == 400
    assert "security token is missing or wrong" in browser.page_source
    assert not browser.find_elements(By.ID, "new-key")
    shot(browser, "08-csrf-refused")
    browser.get(f"{CONSOLE}keys")
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr[data-key-id]")) == keys_before


def test_a_user_who_is_not_an_admin_gets_a_clear_403_page(browser):
    sign_in(browser, "bob")
    assert http_status(browser) == 403
    assert "You are not an admin of this organisation" in browser.page_source
    assert "Bob Builder" in browser.page_source
    shot(browser, "09-not-an-admin")
    # Not a dead end: the organisation's name stays in the header, a link leads back.
    assert "Contoso Group" in browser.find_element(By.CSS_SELECTOR, "header.top").text
    back = browser.find_element(By.ID, "back-to-sign-in")
    assert back.get_attribute("href") == CONSOLE
    assert not [c for c in browser.get_cookies() if c["name"] == "posture_session"]
    browser.get(f"{CONSOLE}keys")
    assert browser.current_url == CONSOLE, "no session: back to the sign-in page"


def test_sign_in_rotates_the_session_and_sign_out_ends_it(browser):
    sign_in(browser, "alice")
    first = session_cookie(browser)["value"]
    sign_in(browser, "alice", again=True)
    second = session_cookie(browser)["value"]
    assert first != second, "a new session token at every sign-in"

    click_and_load(browser, browser.find_element(By.CSS_SELECTOR, "form.signout button"))
    assert "You have signed out" in browser.page_source
    shot(browser, "10-signed-out")
    assert not [c for c in browser.get_cookies() if c["name"] == "posture_session"]
    for token in (first, second):
        browser.add_cookie({"name": "posture_session", "value": token,
                            "path": f"/console/{CUSTOMER}/"})
        browser.get(f"{CONSOLE}keys")
        assert browser.current_url == CONSOLE, "the server ended the session"
    # The customer's audit log tells of both.
    sign_in(browser, "alice")
    browser.get(f"{CONSOLE}audit")
    assert "Signed in" in browser.page_source and "Signed out" in browser.page_source
    shot(browser, "12-audit-sign-in-and-out")


def test_the_keys_page_fits_a_400_pixel_wide_screen(browser):
    sign_in(browser, "alice")
    issue_key(browser, "Narrow screen check", "read:upr", "30d")
    browser.set_window_size(400, 860)
    browser.get(f"{CONSOLE}keys")
    wait(browser).until(lambda d: d.execute_script("return document.readyState") == "complete")
    assert browser.find_elements(By.CSS_SELECTOR, "tr[data-key-id]"), "a key to list"
    shot(browser, "11-keys-400px")
    page_width = browser.execute_script("return document.documentElement.clientWidth")
    content_width = browser.execute_script("return document.documentElement.scrollWidth")
    assert content_width <= page_width, f"the page scrolls sideways: {content_width} > {page_width}"
    # The table scrolls inside its card instead.
    table = browser.find_element(By.CSS_SELECTOR, ".table-scroll")
    assert browser.execute_script("return arguments[0].clientWidth", table) <= page_width
    # Each scope says what it grants.
    assert "provision users and groups over SCIM 2.0" in browser.page_source


def test_an_admin_fences_a_key_sets_the_inactivity_rule_and_reads_the_audit(
        browser, second_browser):
    sign_in(browser, "alice")
    browser.get(f"{CONSOLE}keys")
    browser.find_element(By.ID, "name").send_keys("Fenced SIEM")
    browser.find_element(By.CSS_SELECTOR, "input[name=scope][value='read:identities']").click()
    browser.find_element(By.ID, "allow-from").send_keys("198.51.100.0/24\n2001:db8::/48")
    click_and_load(browser, browser.find_element(By.ID, "issue-key"))
    key = wait(browser).until(EC.presence_of_element_located((By.ID, "new-key"))).text.strip()
    with open(ISSUED, "a", encoding="utf-8") as issued:
        issued.write(key + "\n")
    # The suite calls from loopback, which the list does not name.
    status, body = api_status(key, "/api/v1/identities")
    assert status == 403 and body["error"] == "forbidden"
    assert "198.51" not in body["reason"], "the refusal reveals no network"

    browser.get(f"{CONSOLE}keys")
    row = browser.find_element(By.XPATH, "//tr[td[1][text()='Fenced SIEM']]")
    assert "198.51.100.0/24" in row.text and "2001:db8::/48" in row.text
    click_and_load(browser, row.find_element(By.LINK_TEXT, "Allowed from…"))
    area = browser.find_element(By.ID, "allow-from")
    assert area.get_attribute("value") == "198.51.100.0/24\n2001:db8::/48"
    area.clear()
    area.send_keys("not a network")
    click_and_load(browser, browser.find_element(By.ID, "save-allow-list"))
    assert http_status(browser) == 422
    assert "not a network" in browser.find_element(By.ID, "form-error").text
    area = browser.find_element(By.ID, "allow-from")
    area.clear()
    area.send_keys("127.0.0.1")
    shot(browser, "30-allow-list")
    click_and_load(browser, browser.find_element(By.ID, "save-allow-list"))
    assert browser.current_url == f"{CONSOLE}keys"
    status, _ = api_status(key, "/api/v1/identities")
    assert status == 200, "the new list applies at once"
    # Its last use, with where from, shows once recorded (off the request path).
    for _ in range(50):
        browser.get(f"{CONSOLE}keys")
        row = browser.find_element(By.XPATH, "//tr[td[1][text()='Fenced SIEM']]")
        if "from 127.0.0.1" in row.text:
            break
        time.sleep(0.2)
    assert "from 127.0.0.1" in row.text and "127.0.0.1/32" in row.text
    shot(browser, "31-keys-last-use")

    browser.get(f"{CONSOLE}settings")
    days = browser.find_element(By.ID, "inactivity-days")
    days.clear()
    days.send_keys("90")
    click_and_load(browser, browser.find_element(By.ID, "save-inactivity"))
    assert "after 90 days unused" in browser.find_element(By.ID, "inactivity-now").text
    shot(browser, "32-settings")
    days = browser.find_element(By.ID, "inactivity-days")
    days.clear()
    click_and_load(browser, browser.find_element(By.ID, "save-inactivity"))
    assert "never stop working" in browser.find_element(By.ID, "inactivity-now").text

    # Someone the provider signs in who is no admin: refused, and audited.
    sign_in(second_browser, "bob")
    assert http_status(second_browser) == 403

    browser.get(f"{CONSOLE}audit")
    audit = browser.find_element(By.CSS_SELECTOR, "table.audit").text
    for line in ("Allowed networks changed", "Refused: address not allowed",
                 "Inactivity rule changed", "Sign-in refused", "Bob Builder",
                 "Used from a new address", "127.0.0.1"):
        assert line in audit, line
    shot(browser, "33-audit-fences")


def test_sending_the_issue_form_twice_issues_one_key(browser):
    sign_in(browser, "alice")
    browser.get(f"{CONSOLE}keys")
    browser.find_element(By.ID, "name").send_keys("Sent twice")
    browser.find_element(By.CSS_SELECTOR, "input[name=scope][value='read:roles']").click()
    # What the browser sends, kept to send again as a reload of the result would.
    fields = browser.execute_script(
        "return Array.from(new FormData(document.querySelector('#issue form')).entries())")
    click_and_load(browser, browser.find_element(By.ID, "issue-key"))
    key = wait(browser).until(EC.presence_of_element_located((By.ID, "new-key"))).text.strip()
    with open(ISSUED, "a", encoding="utf-8") as issued:
        issued.write(key + "\n")
    old = browser.find_element(By.TAG_NAME, "html")
    browser.execute_script("""
        const form = document.createElement('form');
        form.method = 'post';
        form.action = arguments[1];
        for (const [name, value] of arguments[0]) {
            const input = document.createElement('input');
            input.type = 'hidden'; input.name = name; input.value = value;
            form.appendChild(input);
        }
        document.body.appendChild(form);
        form.submit();
    """, fields, f"{CONSOLE}keys")
    wait(browser).until(detached(old))
    wait(browser).until(lambda d: d.execute_script("return document.readyState") == "complete")
    assert "This form was already sent" in browser.page_source
    assert key not in browser.page_source
    rows = browser.find_elements(By.XPATH, "//tr[td[1][text()='Sent twice']]")
    assert len(rows) == 1, "one key, not two"
    shot(browser, "13-form-sent-twice")


def test_an_admin_signs_out_every_other_session(browser, second_browser):
    sign_in(second_browser, "alice")  # the laptop left at the office
    sign_in(browser, "alice")
    click_and_load(browser, browser.find_element(By.LINK_TEXT, "Sessions"))
    assert browser.current_url == f"{CONSOLE}sessions"
    rows = browser.find_elements(By.CSS_SELECTOR, "tr[data-session-id]")
    assert len(rows) >= 2, "this session and the other browser's"
    assert "This session" in rows[0].text, "newest first: the one just signed in"
    assert session_cookie(second_browser)["value"] not in browser.page_source
    shot(browser, "14-sessions")
    click_and_load(browser, browser.find_element(By.ID, "end-others"))
    assert "were ended" in browser.page_source or "was ended" in browser.page_source
    rows = browser.find_elements(By.CSS_SELECTOR, "tr[data-session-id]")
    assert len(rows) == 1 and "This session" in rows[0].text
    assert not browser.find_elements(By.ID, "end-others")
    shot(browser, "15-signed-out-everywhere-else")
    # The other browser is signed out at once; this one is not.
    second_browser.get(f"{CONSOLE}keys")
    assert second_browser.current_url == CONSOLE
    browser.get(f"{CONSOLE}keys")
    assert browser.current_url == f"{CONSOLE}keys"
    browser.get(f"{CONSOLE}audit")
    audit = browser.find_element(By.CSS_SELECTOR, "table.audit").text
    assert "Ended sessions" in audit and "other session" in audit


def sign_in_with_the_second_provider(driver, button):
    """From the second customer's sign-in page through oidc-provider-mock's form."""
    driver.get(SECOND_CONSOLE)
    sign_in_button = driver.find_element(By.ID, "sign-in")
    assert sign_in_button.text == f"Sign in with {SECOND_PROVIDER_NAME}"
    click_and_load(driver, sign_in_button)
    assert not on_posture(driver), "at the provider's form"
    click_and_load(driver, driver.find_element(By.CSS_SELECTOR, button))
    wait(driver).until(on_posture)


def test_a_provider_of_another_make_signs_admins_in_and_others_not(browser):
    browser.get(SECOND_CONSOLE)
    shot(browser, "16-second-provider-sign-in")
    sign_in_with_the_second_provider(
        browser, "button[name=sub][value='dana@fabrikam.example']")
    assert browser.current_url == f"{SECOND_CONSOLE}keys"
    header = browser.find_element(By.CSS_SELECTOR, "header.top").text
    assert "Fabrikam" in header and "Dana Fabrikam" in header
    shot(browser, "17-second-provider-keys")
    click_and_load(browser, browser.find_element(By.CSS_SELECTOR, "form.signout button"))
    assert "You have signed out" in browser.page_source

    # Not an admin there: refused, with the way back.
    sign_in_with_the_second_provider(
        browser, "button[name=sub][value='erin@fabrikam.example']")
    assert http_status(browser) == 403
    assert "Erin Fabrikam" in browser.page_source
    assert browser.find_element(By.ID, "back-to-sign-in").get_attribute("href") == SECOND_CONSOLE

    # Denied at the provider: the provider's error in words, and the way back.
    sign_in_with_the_second_provider(browser, "button[name=action][value=deny]")
    assert http_status(browser) == 400
    assert "did not sign you in (access_denied)" in browser.page_source
    assert "Fabrikam" in browser.find_element(By.CSS_SELECTOR, "header.top").text
    shot(browser, "18-second-provider-denied")
    click_and_load(browser, browser.find_element(By.ID, "back-to-sign-in"))
    assert browser.current_url == SECOND_CONSOLE


SCIM_USER = "urn:ietf:params:scim:schemas:core:2.0:User"
SCIM_GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
SCIM_PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"


def scim(key, method, path, body=None):
    """A SCIM request as an identity provider sends it; the answer's status and body."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{BASE}/scim/v2{path}", data=data, method=method,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/scim+json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def require_provisioning():
    """`posture-api customers sso provisioning`, as the operator runs it."""
    subprocess.run(
        [os.environ["POSTURE_API"], "customers", "sso", "provisioning",
         "--customer", THIRD_CUSTOMER, "--match-claim", "email",
         "--admin-group", "Posture Admins"],
        check=True, capture_output=True, env={**os.environ, "POSTURE_LOG": "warn"})


def test_with_provisioning_required_a_deactivated_admin_is_signed_out_at_once(
        browser, second_browser):
    # Before provisioning is required, the admin rule admits alice: she issues the token
    # her identity provider's SCIM connector will use, in the console.
    sign_in(browser, "alice", console=THIRD_CONSOLE)
    key = issue_key(browser, "Entra ID provisioning", "provision:scim", "never",
                    console=THIRD_CONSOLE)
    # The identity provider provisions: alice and bob, and the admin group with alice.
    status, alice = scim(key, "POST", "/Users", {
        "schemas": [SCIM_USER], "userName": "alice@contoso.example", "active": True,
        "displayName": "Alice Admin"})
    assert status == 201, alice
    status, bob = scim(key, "POST", "/Users", {
        "schemas": [SCIM_USER], "userName": "bob@contoso.example", "active": True})
    assert status == 201, bob
    status, group = scim(key, "POST", "/Groups", {
        "schemas": [SCIM_GROUP], "displayName": "Posture Admins",
        "members": [{"value": alice["id"]}]})
    assert status == 201, group

    require_provisioning()
    browser.get(f"{THIRD_CONSOLE}keys")
    assert browser.current_url == THIRD_CONSOLE, "requiring provisioning ended the session"

    # Provisioned and in the admin group: alice signs in, and sees who was provisioned.
    sign_in(browser, "alice", console=THIRD_CONSOLE)
    assert browser.current_url == f"{THIRD_CONSOLE}keys"
    click_and_load(browser, browser.find_element(By.LINK_TEXT, "Directory"))
    assert browser.current_url == f"{THIRD_CONSOLE}users"
    users = browser.find_element(By.CSS_SELECTOR, "table.users").text
    assert "alice@contoso.example" in users and "bob@contoso.example" in users
    assert "Provisioning is required" in browser.page_source
    shot(browser, "19-provisioned-users")
    click_and_load(browser, browser.find_element(By.LINK_TEXT, "Groups"))
    row = browser.find_element(By.CSS_SELECTOR, "tr[data-group-name='Posture Admins']")
    assert "Admins" in row.text
    shot(browser, "20-provisioned-groups")

    # Provisioned but not in the admin group: refused, the group named.
    sign_in(second_browser, "bob", console=THIRD_CONSOLE)
    assert http_status(second_browser) == 403
    assert "Posture Admins" in second_browser.page_source
    shot(second_browser, "21-provisioned-not-an-admin")

    # Entra ID deactivates alice; her next request, at once, finds her signed out.
    status, _ = scim(key, "PATCH", f"/Users/{alice['id']}", {
        "schemas": [SCIM_PATCH], "Operations": [{"op": "Replace", "value": {"active": "False"}}]})
    assert status == 200
    deactivated = time.monotonic()
    browser.get(f"{THIRD_CONSOLE}keys")
    signed_out_after = time.monotonic() - deactivated
    assert browser.current_url == THIRD_CONSOLE, "the session ended"
    assert signed_out_after < 1.0, f"signed out {signed_out_after:.2f} s after deactivation"
    sign_in(browser, "alice", console=THIRD_CONSOLE, again=True)
    assert http_status(browser) == 403
    assert "Your account is deactivated" in browser.page_source
    shot(browser, "22-deactivated")
