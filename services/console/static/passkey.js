// deadletter console: passkeys (WebAuthn), no framework.
//
// A form marked data-passkey-create makes a passkey: it asks the console
// for the creation's options (POST action + "/options"), calls
// navigator.credentials.create and posts the new credential (id,
// attestation object, client data) with the form.
//
// A form marked data-sign is a decision signed with the person's
// passkey: on submit it asks the console for the decision (POST action +
// "/challenge" with the form's fields but the password), shows it in the
// form's [data-sign-show], has navigator.credentials.get sign its
// challenge (the decision's digest) and posts the assertion and the time
// signed with the form. Without JavaScript or WebAuthn the form posts
// unsigned and the service refuses the decision with its code.
(function () {
  "use strict";

  function b64u(buf) {
    var bytes = new Uint8Array(buf), s = "";
    for (var i = 0; i < bytes.length; i++) { s += String.fromCharCode(bytes[i]); }
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function unb64u(s) {
    s = s.replace(/-/g, "+").replace(/_/g, "/");
    while (s.length % 4) { s += "="; }
    var bin = atob(s), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) { out[i] = bin.charCodeAt(i); }
    return out;
  }
  function field(form, name) { return form.querySelector("input[name=\"" + name + "\"]"); }
  // say shows text in the form's status; failed marks it a failure
  // (class "failed").
  function say(form, text, failed) {
    var el = form.querySelector("[data-sign-status]");
    if (!el) { return; }
    el.textContent = text;
    el.classList.toggle("failed", !!failed);
  }
  function busy(form, on) {
    form.setAttribute("aria-busy", on ? "true" : "false");
    var bs = form.querySelectorAll("button[type=submit]");
    for (var i = 0; i < bs.length; i++) {
      var b = bs[i];
      if (on) {
        if (!b.hasAttribute("data-idle-label")) { b.setAttribute("data-idle-label", b.textContent); }
        if (b.hasAttribute("data-busy-label")) { b.textContent = b.getAttribute("data-busy-label"); }
      } else if (b.hasAttribute("data-idle-label")) {
        b.textContent = b.getAttribute("data-idle-label");
      }
      b.disabled = on;
      b.setAttribute("aria-busy", on ? "true" : "false");
    }
  }
  // ask posts the form's fields (never its password) to url and returns
  // the JSON answer; a refusal carries {error: {code, message}}.
  function ask(form, url) {
    var body = new URLSearchParams();
    var fd = new FormData(form);
    fd.forEach(function (v, k) { if (k !== "password" && typeof v === "string") { body.append(k, v); } });
    var csrf = field(form, "csrf");
    return fetch(url, {
      method: "POST", body: body, credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf ? csrf.value : "", "Accept": "application/json" }
    }).then(function (r) {
      return r.json().then(function (j) {
        if (j && j.error) { throw new Error(j.error.code + ": " + j.error.message); }
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return j;
      });
    });
  }
  function failed(form, what) {
    return function (err) {
      busy(form, false);
      var msg = err && err.name === "NotAllowedError" ? "The passkey prompt was cancelled or timed out; nothing was " + what + "." : (err && err.message) || String(err);
      say(form, msg, true);
    };
  }

  // show writes the decision being signed into the form (as text).
  function show(form, d) {
    var box = form.querySelector("[data-sign-show]");
    if (!box) { return; }
    var dl = box.querySelector("dl");
    while (dl.firstChild) { dl.removeChild(dl.firstChild); }
    var rows = [["Action", d.action], ["Target", d.target], ["Request digest", d.request], ["Chain", d.chain || "—"],
      ["Meaning", d.meaning], ["Person", d.person], ["Role", d.role], ["Signed at", d.at]];
    for (var i = 0; i < rows.length; i++) {
      var dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = rows[i][0];
      dd.textContent = rows[i][1];
      dl.appendChild(dt);
      dl.appendChild(dd);
    }
    box.hidden = false;
  }

  function sign(form) {
    if (!window.PublicKeyCredential || !navigator.credentials) {
      say(form, "This browser has no passkeys (WebAuthn): the decision cannot be signed here.", true);
      return;
    }
    busy(form, true);
    say(form, "Preparing the decision…");
    ask(form, form.getAttribute("action") + "/challenge").then(function (c) {
      show(form, c.decision);
      say(form, "Confirm with your passkey.");
      return navigator.credentials.get({ publicKey: {
        challenge: unb64u(c.challenge), rpId: c.rp_id, userVerification: "required", timeout: 120000, allowCredentials: []
      } }).then(function (cred) {
        var r = cred.response;
        field(form, "signed_at").value = c.signed_at;
        field(form, "passkey_id").value = b64u(cred.rawId);
        field(form, "passkey_authenticator_data").value = b64u(r.authenticatorData);
        field(form, "passkey_client_data").value = b64u(r.clientDataJSON);
        field(form, "passkey_signature").value = b64u(r.signature);
        say(form, "Signed; sending…");
        form.submit();
      });
    }).catch(failed(form, "signed"));
  }

  function create(form) {
    if (!window.PublicKeyCredential || !navigator.credentials) {
      say(form, "This browser has no passkeys (WebAuthn).", true);
      return;
    }
    busy(form, true);
    say(form, "Asking your authenticator…");
    ask(form, form.getAttribute("action") + "/options").then(function (o) {
      var params = [];
      for (var i = 0; i < o.algorithms.length; i++) { params.push({ type: "public-key", alg: o.algorithms[i] }); }
      return navigator.credentials.create({ publicKey: {
        challenge: unb64u(o.challenge),
        rp: { id: o.rp.id, name: o.rp.name },
        user: { id: unb64u(o.user.id), name: o.user.name, displayName: o.user.displayName },
        pubKeyCredParams: params,
        authenticatorSelection: { residentKey: o.residentKey, requireResidentKey: o.residentKey === "required", userVerification: o.userVerification },
        attestation: o.attestation,
        timeout: o.timeout
      } }).then(function (cred) {
        field(form, "credential_id").value = b64u(cred.rawId);
        field(form, "attestation_object").value = b64u(cred.response.attestationObject);
        field(form, "client_data").value = b64u(cred.response.clientDataJSON);
        say(form, "Made; checking it…");
        form.submit();
      });
    }).catch(failed(form, "made"));
  }

  // In the capture phase, before htmx's boosted forms and the data-busy
  // handler see the submit: the form is sent by form.submit() once
  // signed (which fires no submit event).
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form || !form.hasAttribute) { return; }
    var signing = form.hasAttribute("data-sign"), creating = form.hasAttribute("data-passkey-create");
    if (!signing && !creating) { return; }
    e.preventDefault();
    e.stopPropagation();
    if (form.getAttribute("aria-busy") === "true") { return; }
    if (signing) { sign(form); } else { create(form); }
  }, true);
})();
