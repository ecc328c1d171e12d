"""Repository permissions: syncing from code hosts and what each caller may see."""
