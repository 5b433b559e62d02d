// Passkeys (WebAuthn) for XCloak's pages: registering one on the account
// page, answering the second step with one, and signing in with one alone.
// The server keeps each challenge; this script only carries options and
// responses between it and navigator.credentials, converting the binary
// fields to and from base64url. Served from 'self', as the CSP requires.
"use strict";
(function () {
  function toBuffer(s) {
    s = s.replace(/-/g, "+").replace(/_/g, "/");
    while (s.length % 4) s += "=";
    var bin = atob(s), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out.buffer;
  }
  function fromBuffer(buf) {
    var bytes = new Uint8Array(buf), s = "";
    for (var i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function descriptors(list) {
    return (list || []).map(function (c) { c.id = toBuffer(c.id); return c; });
  }
  function creationOptions(o) {
    var p = o.publicKey;
    p.challenge = toBuffer(p.challenge);
    p.user.id = toBuffer(p.user.id);
    p.excludeCredentials = descriptors(p.excludeCredentials);
    return { publicKey: p };
  }
  function requestOptions(o) {
    var p = o.publicKey;
    p.challenge = toBuffer(p.challenge);
    p.allowCredentials = descriptors(p.allowCredentials);
    return { publicKey: p };
  }
  // credentialJSON is the credential as the server parses it.
  function credentialJSON(c) {
    var r = c.response, out = {
      id: c.id, rawId: fromBuffer(c.rawId), type: c.type,
      clientExtensionResults: c.getClientExtensionResults ? c.getClientExtensionResults() : {},
      response: { clientDataJSON: fromBuffer(r.clientDataJSON) }
    };
    if (c.authenticatorAttachment) out.authenticatorAttachment = c.authenticatorAttachment;
    if (r.attestationObject) {
      out.response.attestationObject = fromBuffer(r.attestationObject);
      if (r.getTransports) out.response.transports = r.getTransports();
    }
    if (r.authenticatorData) {
      out.response.authenticatorData = fromBuffer(r.authenticatorData);
      out.response.signature = fromBuffer(r.signature);
      if (r.userHandle) out.response.userHandle = fromBuffer(r.userHandle);
    }
    return out;
  }
  function post(url, body) {
    return fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify(body || {})
    }).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (data) {
        return { ok: res.ok, status: res.status, data: data };
      });
    });
  }
  function say(text) {
    var p = document.getElementById("passkey-problem");
    if (!p) return;
    // An alert, styled as the pages' problems, only once it says
    // something: an empty one is noise to screen readers.
    if (text) p.setAttribute("role", "alert"); else p.removeAttribute("role");
    p.className = text ? "problem" : "";
    p.textContent = text;
    p.hidden = !text;
  }
  function problemText(res) {
    if (res.status === 429) return "Too many attempts. Wait a while, then try again.";
    if (res.data && res.data.error === "invalid_token") return "This sign-in has expired or was finished already. Sign in again.";
    return "That passkey was not accepted. Try again, or sign in another way.";
  }
  // done goes where a finished sign-in leads: the page the server allowed
  // (data-return), the password page if it must change, else the account.
  function done(el, res) {
    if (res.data && res.data.status === "change_password") { location.assign("/account/password"); return; }
    location.assign(el.dataset.return || "/account");
  }
  var supported = !!(window.PublicKeyCredential && navigator.credentials);

  var enrol = document.getElementById("passkey-enrol-form");
  if (enrol) {
    if (!supported) say("This browser cannot make passkeys.");
    enrol.addEventListener("submit", function (ev) {
      var field = document.getElementById("passkey-credential");
      if (field.value) return;
      ev.preventDefault();
      say("");
      post("/account/mfa/passkey/options").then(function (res) {
        if (!res.ok) throw res;
        return navigator.credentials.create(creationOptions(res.data));
      }).then(function (cred) {
        field.value = JSON.stringify(credentialJSON(cred));
        enrol.submit();
      }).catch(function (e) {
        say(e && e.status ? problemText(e) : "No passkey was made. Try again.");
      });
    });
  }

  var step = document.getElementById("passkey-step");
  if (step && supported) {
    var token = step.dataset.mfaToken, ready = null;
    // The server says whether the account has a passkey only to the
    // browser holding this second step, that is after the right password.
    var ask = function () {
      return post("/api/v1/login/mfa/webauthn/options", { mfa_token: token });
    };
    ask().then(function (res) {
      if (res.ok) { ready = res.data; step.hidden = false; }
    });
    document.getElementById("use-passkey").addEventListener("click", function () {
      say("");
      var opts = ready ? Promise.resolve({ ok: true, data: ready }) : ask();
      ready = null;
      opts.then(function (res) {
        if (!res.ok) throw res;
        return navigator.credentials.get(requestOptions(res.data));
      }).then(function (cred) {
        var remember = document.getElementById("remember");
        return post("/api/v1/login/mfa/webauthn", {
          mfa_token: token, credential: credentialJSON(cred), remember: !!(remember && remember.checked)
        });
      }).then(function (res) {
        if (!res.ok) throw res;
        done(step, res);
      }).catch(function (e) {
        say(e && e.status ? problemText(e) : "No passkey was used. Try again.");
      });
    });
  }

  var alone = document.getElementById("passkey-sign-in");
  if (alone && supported) {
    alone.hidden = false;
    document.getElementById("sign-in-passkey").addEventListener("click", function () {
      say("");
      post("/api/v1/login/passkey/options").then(function (res) {
        if (!res.ok) throw res;
        return navigator.credentials.get(requestOptions(res.data));
      }).then(function (cred) {
        return post("/api/v1/login/passkey", { credential: credentialJSON(cred) });
      }).then(function (res) {
        if (!res.ok) throw res;
        done(alone, res);
      }).catch(function (e) {
        say(e && e.status ? problemText(e) : "No passkey was used. Try again.");
      });
    });
  }
})();
