"""GPU types and instance offers: the catalog the planner chooses from."""

from solver.catalog.types import Catalog, GpuType, Offer
from solver.catalog.loader import default_catalog, load_catalog_file

__all__ = ["Catalog", "GpuType", "Offer", "default_catalog", "load_catalog_file"]
