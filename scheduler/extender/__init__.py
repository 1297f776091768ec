"""kubenode as a scheduler extender for an unmodified kube-scheduler (`kubenode scheduler extender`).

`state` holds the informer-fed cache and the filter/prioritize/assume logic; `server` is
the aiohttp server for /filter, /prioritize and /bind. The wire format is
`scheduler.extender_api`, shared with the calling side (`scheduler.extenders`).
"""
