"""kubenode deviceplugin."""
