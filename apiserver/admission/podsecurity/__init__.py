"""Pod Security admission (kube's staging/src/k8s.io/pod-security-admission), in this API server.

Flow: `levels.py` reads a namespace's `pod-security.kubernetes.io/{enforce,audit,warn}[-version]` labels
into a Policy (with the configured defaults); `checks.py` holds the Pod Security Standards' checks and
evaluates a pod against a level and version; `admission.py` is the plugin: pods that violate `enforce`
are refused with kube's `violates PodSecurity "<level>:<version>": ...`, `warn` violations come back as
warnings, `audit` violations as audit annotations; namespaces with bad labels are refused, and raising a
namespace's enforce level warns about its existing pods. `config.py` reads the defaults and exemptions
(usernames, namespaces, runtimeClasses) from kube's AdmissionConfiguration file.
"""
