"""HTTP handlers: the aiohttp app and middleware (`app`), REST verbs (`rest`), writes (`writes`),
deletes (`deletes`), subresources (`subresources`) and watch streams (`watch`)."""
